"""The blocking client: one socket, one reader thread, handlers on threads of their own.

Carries the frames of a ``Session`` over a Unix socket. The reader thread only reads,
matches replies and hands work off: the only user code it runs is a monitor's callback,
which must see frames in order, so a slow handler holds up nothing else on the connection.
What the calls do beyond waiting is shared with the asyncio client, in ``_front``.
"""

from __future__ import annotations

import logging
import socket as _socket
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as _FutureTimeout
from types import TracebackType
from typing import Any, Callable, Optional, Type, TypeVar, cast

from ._blocking_reconnect import BlockingReconnect
from ._errors import ConnectionLost
from ._framing import FrameDecoder
from ._front import (
    READ_SIZE,
    Ask,
    ClientFront,
    Connecting,
    MethodChannelFront,
    Play,
    Steps,
    Threads,
    blocking_connect,
    connecting,
    hand_over,
    read_failure,
    timed_out,
    work_steps,
)
from ._paths import socket_error
from ._reconnect import ConnectionState, Registry
from ._session import Request, Session, Work
from .profile import BlockingProfile

logger = logging.getLogger("notifbus")

_T = TypeVar("_T")


def _open(settings: Connecting) -> Client:
    """Connect to the socket and say ``hello``, within the connect's timeout."""
    path, timeout = settings.path, settings.timeout
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        sock.settimeout(timeout)
        sock.connect(path)
    except OSError as exc:
        sock.close()
        raise socket_error(exc, path) from None
    except BaseException:
        sock.close()
        raise
    client = Client(sock, path, timeout)
    try:
        client._perform(client._session.hello(settings.name), None)
    except ConnectionLost as exc:
        # A refusing broker sends one error frame, then closes: let the reader take it
        # in, so the caller learns why.
        client._reader.join(timeout)
        client.close()
        reason = client._session.close_reason
        if reason is not None:
            raise reason from exc
        raise
    except BaseException:
        client.close()
        raise
    return client


connect = blocking_connect(connecting, _open)


class Client(ClientFront, Threads, BlockingReconnect, BlockingProfile):
    """A connection to the broker. Use :func:`connect` to make one.

    Thread-safe: any thread may call any method. A context manager: leaving the
    ``with`` block closes the connection. Every method takes a keyword ``timeout``
    (seconds) that overrides :attr:`timeout` for that call; when no reply comes in
    time it raises ``RequestTimeout``. When the connection is lost, every waiting
    and later call raises ``ConnectionLost``. Error replies raise ``BrokerError``.

    While the client reconnects, calls wait for the new connection within their
    timeout; calls in flight at the loss raise ``ConnectionLost`` and are not sent
    again, unless they carry an idempotency key (``once``): those are sent again on the
    new connection. Observer and handler ids returned before stay valid as arguments.
    """

    def __init__(self, sock: _socket.socket, path: str, timeout: float) -> None:
        self._sock = sock
        self._session = Session()
        self._send_lock = threading.Lock()
        self._close_lock = threading.Lock()
        self._closed = False
        self._name: Optional[str] = None
        self._reconnect: Optional[bool] = False
        self._registry = Registry()
        self._state = threading.Condition()
        self._reconnecting = False
        #: Called with a :class:`ConnectionState` when the connection is lost and back.
        self.on_connection_state: Optional[Callable[[ConnectionState], Any]] = None
        #: The socket path this client is connected to.
        self.socket_path = path
        #: Default timeout in seconds for every call.
        self.timeout = timeout
        self._reader = threading.Thread(target=self._read_loop, args=(sock, 0), name="notifbus-reader", daemon=True)
        self._reader.start()

    # -- connection -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """False once the connection is closed or lost, and while reconnecting."""
        return not self._session.lost and not self._may_wait_for_reconnect()

    def close(self) -> None:
        """Close the connection. Pending calls fail with ``ConnectionLost``. Idempotent.

        The broker drops this connection's observers and handlers.
        """
        with self._close_lock:
            if self._closed:
                return
            self._closed = True
        with self._state:
            self._state.notify_all()
        with self._send_lock:
            sock = self._sock
        try:
            sock.shutdown(_socket.SHUT_RDWR)
        except OSError:
            pass
        if threading.current_thread() is not self._reader:
            self._reader.join(self.timeout)
        self._session.connection_lost("connection closed by the client")
        sock.close()

    def wait_closed(self, timeout: Optional[float] = None) -> bool:
        """Block until the client has ended, at most ``timeout`` seconds (``None``: no
        bound); True once it has. It ends when :meth:`close` is called, or when the
        connection is lost and the client does not reconnect (``reconnect=False``, or
        nothing to make again); a client that reconnects after a broker restart has not
        ended, and this goes on waiting through the reconnection."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._state:
            while not (self._closed or (self._session.lost and not self._reconnecting)):
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._state.wait(remaining)
        return True

    def run_forever(self) -> None:
        """Serve observers and handlers until the client ends: what an observer process
        does after registering, instead of a polling loop. A broker restart does not end
        it: the client reconnects and makes its observers and handlers again.

        Returns when :meth:`close` was called (from a handler or another thread) or on
        ``KeyboardInterrupt`` (after closing); raises ``ConnectionLost`` when the
        connection is lost for good (``reconnect=False``, or nothing to make again).
        """
        try:
            while not self.wait_closed(1.0):
                pass
        except KeyboardInterrupt:
            self.close()
            return
        if not self._closed:
            raise self._session.lost_error()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        self.close()

    # -- the calls: ping, monitor, add_observer, remove_observer(_by_unique_key), post, put,
    # take, peek, (set_)notification_categories and status, written once in _front.ClientFront

    def method_channel(self, name: str) -> MethodChannel:
        """A :class:`MethodChannel` named ``name`` on this connection."""
        return MethodChannel(self, name)

    # -- plumbing ---------------------------------------------------------------------

    def _drive(self, steps: Steps[_T]) -> _T:
        """Play a call written as steps (``_front``): wait for each reply, call user code
        on this thread."""
        play = Play(steps)
        step = play.next()
        while step is not None:
            try:
                play.answer(self._perform(step.request, step.timeout) if isinstance(step, Ask) else step.code())
            except Exception as exc:
                play.fail(exc)
            step = play.next()
        return cast(_T, play.result)

    def _perform(self, request: Request[_T], timeout: Optional[float]) -> _T:
        limit = self._limit(request, timeout)
        deadline = time.monotonic() + limit
        while True:
            started = None
            while started is None:
                self._wait_until_connected(request.op, deadline)
                waiter: "Future[_T]" = Future()
                started = self._start(request, waiter)
            generation, request_id, data = started
            try:
                self._send(data, generation)
                return waiter.result(max(0.0, deadline - time.monotonic()))
            except _FutureTimeout:
                if waiter.done():
                    return waiter.result(0)
                raise timed_out(request, limit) from None
            except ConnectionLost:
                # A keyed request goes out again on the new connection, with the same bytes.
                if not self._resends(request, generation):
                    raise
            finally:
                self._session.cancel(request_id)

    def _send(self, data: bytes, generation: int) -> None:
        with self._send_lock:
            if self._closed or self._session.lost or self._session.generation != generation:
                raise self._session.lost_error()
            try:
                self._sock.sendall(data)
            except OSError as exc:
                # A partial send leaves the stream out of step: the connection is done for.
                # Only the sending side is shut, so the reader still takes in whatever the
                # broker said before it closed.
                self._connection_ended(generation, f"send failed: {exc}")
                try:
                    self._sock.shutdown(_socket.SHUT_WR)
                except OSError:
                    pass
                raise self._session.lost_error() from exc

    def _send_answer(self, data: bytes, generation: int) -> None:
        try:
            self._send(data, generation)
        except ConnectionLost as exc:
            logger.debug("notifbus: answer not sent: %s", exc)

    def _read_loop(self, sock: _socket.socket, generation: int) -> None:
        decoder = FrameDecoder()
        reason = "broker closed the connection"
        try:
            while True:
                try:
                    data = sock.recv(READ_SIZE)
                except _socket.timeout:
                    continue
                if not data:
                    break
                decoder.feed(data)
                hand_over(self._session, decoder, lambda work: self._dispatch(work, generation))
        except Exception as exc:  # a bug here must not leave callers hanging either
            reason = read_failure(exc, "thread")
        finally:
            self._reader_ended(generation, reason)
            try:
                sock.shutdown(_socket.SHUT_RDWR)
            except OSError:
                pass

    def _dispatch(self, work: Work, generation: int) -> None:
        # Even a bare answer is sent from another thread: the reader must never block
        # on a full socket while the broker waits for it to read.
        threading.Thread(target=self._run, args=(work, generation), name="notifbus-handler", daemon=True).start()

    def _run(self, work: Work, generation: int) -> None:
        data = self._drive(work_steps(self._session, work))
        if data is not None:
            self._send_answer(data, generation)


class MethodChannel(MethodChannelFront, Threads):
    """A named channel for method calls between processes, as Flutter's ``MethodChannel``:
    ``invoke_method`` and ``set_method_call_handler``, written once in ``_front``."""

    _client: Client
