"""The asyncio client: the same API as :mod:`notifbus`, with coroutines.

Carries the frames of a ``Session`` over an asyncio Unix stream. One reader task reads
and matches replies; every handler runs as a task of its own, so a slow handler holds
up nothing else on the connection. Everything runs on the loop that connected. What the
calls do beyond awaiting is shared with the blocking client, in ``_front``.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket as _socket
from types import TracebackType
from typing import Any, Callable, Dict, Optional, Set, Type, TypeVar, cast

from . import _exports
from ._aio_reconnect import AsyncReconnect
from ._errors import ConnectionLost, RequestTimeout
from ._exports import *  # noqa: F401,F403  (the names notifbus exports too)
from ._framing import FrameDecoder
from ._front import (  # noqa: F401  (importable from here as before)
    READ_SIZE,
    Ask,
    ClientFront,
    Connecting,
    EvictionCallback,
    MethodCallHandler,
    MethodChannelFront,
    ObserverHandler,
    Play,
    Steps,
    Tasks,
    connecting,
    coroutine_connect,
    hand_over,
    read_failure,
    timed_out,
    work_steps,
)
from ._paths import socket_error
from ._reconnect import ConnectionState, Registry
from ._session import Request, Session, Work
from ._types import SeenFrame, Verdict  # noqa: F401  (importable from here as before)
from .profile import AsyncProfile

__all__ = ["Client", "MethodChannel", "connect"]
__all__ += _exports.__all__

logger = logging.getLogger("notifbus")

_T = TypeVar("_T")


async def _open(settings: Connecting) -> Client:
    """Connect to the socket and say ``hello``, within the connect's timeout."""
    path, timeout = settings.path, settings.timeout
    loop = asyncio.get_running_loop()
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.setblocking(False)
    session = Session()
    decoder = FrameDecoder()
    try:
        try:
            await asyncio.wait_for(_greet(loop, sock, path, session, decoder, settings.name), timeout)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"no answer to hello from {path} within {timeout:g} s") from None
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(sock=sock), timeout)
    except BaseException:
        sock.close()
        raise
    return Client(reader, writer, path, timeout, session, decoder)


connect = coroutine_connect(
    connecting, _open, "``on_connection_state`` may be a coroutine function. Use the client with ``async with``."
)


async def _greet(
    loop: asyncio.AbstractEventLoop,
    sock: _socket.socket,
    path: str,
    session: Session,
    decoder: FrameDecoder,
    name: Optional[str],
) -> None:
    """Connect and do the ``hello`` exchange on the bare socket.

    Streams drop bytes already received once a write fails, and a refusing broker
    writes its one error frame and closes, so the hello reply (or the refusal) is read
    here, where a failed send cannot hide it.
    """
    try:
        await loop.sock_connect(sock, path)
    except OSError as exc:
        raise socket_error(exc, path) from None
    waiter: "asyncio.Future[Dict[str, Any]]" = loop.create_future()
    request_id, data = session.start(session.hello(name), waiter)
    try:
        await loop.sock_sendall(sock, data)
    except OSError as exc:
        logger.debug("notifbus: sending hello failed: %r", exc)
    while not waiter.done():
        try:
            chunk = await loop.sock_recv(sock, READ_SIZE)
        except OSError as exc:
            session.connection_lost(f"connection error: {exc}")
            break
        if not chunk:
            session.connection_lost("broker closed the connection")
            break
        decoder.feed(chunk)
        while not waiter.done():
            frame = decoder.next_frame()
            if frame is None:
                break
            session.receive(frame)
    session.cancel(request_id)
    try:
        waiter.result()
    except ConnectionLost as exc:
        if exc.reason is not None:
            raise exc.reason from exc
        raise


class Client(ClientFront, Tasks, AsyncReconnect, AsyncProfile):
    """A connection to the broker. Use :func:`connect` to make one.

    Methods are coroutines and must be awaited on the loop that connected. Every one
    takes a keyword ``timeout`` (seconds) that overrides :attr:`timeout` for that
    call; when no reply comes in time it raises ``RequestTimeout``. When the
    connection is lost, every waiting and later call raises ``ConnectionLost``.
    Error replies raise ``BrokerError``. Reconnection is as for
    :class:`notifbus.Client`.
    """

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        path: str,
        timeout: float,
        session: Session,
        decoder: FrameDecoder,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._session = session
        self._decoder = decoder
        self._closed = False
        # StreamWriter.drain() may not be awaited by two tasks at once on Python 3.9.
        self._drain_lock = asyncio.Lock()
        self._tasks: Set["asyncio.Task[None]"] = set()
        self._name: Optional[str] = None
        self._reconnect: Optional[bool] = None
        self._registry = Registry()
        self._reconnecting = False
        self._connected = asyncio.Event()
        self._connected.set()
        #: Set once the client has ended: closed, or lost without reconnecting.
        self._ended = asyncio.Event()
        #: Called (or awaited) with a :class:`ConnectionState` when the connection is
        #: lost and when it is back.
        self.on_connection_state: Optional[Callable[[ConnectionState], Any]] = None
        #: The socket path this client is connected to.
        self.socket_path = path
        #: Default timeout in seconds for every call.
        self.timeout = timeout
        self._reader_task = asyncio.get_running_loop().create_task(self._read_loop(reader, writer, decoder, 0))

    # -- connection -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """False once the connection is closed or lost, and while reconnecting."""
        return not self._session.lost and not self._reconnecting

    async def close(self) -> None:
        """Close the connection. Pending calls fail with ``ConnectionLost`` and running
        handler tasks are cancelled. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._ended.set()
        self._session.connection_lost("connection closed by the client")
        current = asyncio.current_task()
        for task in list(self._tasks):
            if task is not current:
                task.cancel()
        self._reader_task.cancel()
        self._writer.close()
        try:
            await asyncio.wait_for(self._writer.wait_closed(), self.timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            logger.debug("notifbus: closing the stream: %r", exc)
        await asyncio.gather(self._reader_task, return_exceptions=True)

    async def wait_closed(self) -> None:
        """Wait until the client has ended: :meth:`close` was called, or the connection
        was lost and the client does not reconnect (``reconnect=False``, or nothing to
        make again). A client that reconnects after a broker restart has not ended, and
        this goes on waiting through the reconnection. Bound it with
        ``asyncio.wait_for`` where needed."""
        await self._ended.wait()
        await asyncio.gather(asyncio.shield(self._reader_task), return_exceptions=True)

    async def run_forever(self) -> None:
        """Serve observers and handlers until the client ends: what an observer process
        awaits after registering, instead of a polling loop. A broker restart does not
        end it: the client reconnects and makes its observers and handlers again.
        Returns when :meth:`close` was called; raises ``ConnectionLost`` when the
        connection is lost for good (``reconnect=False``, or nothing to make again)."""
        await self.wait_closed()
        if not self._closed:
            raise self._session.lost_error()

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.close()

    # -- the calls: ping, monitor, add_observer, remove_observer(_by_unique_key), post, put,
    # take, peek, (set_)notification_categories and status, written once in _front.ClientFront

    def method_channel(self, name: str) -> MethodChannel:
        """A :class:`MethodChannel` named ``name`` on this connection."""
        return MethodChannel(self, name)

    # -- plumbing ---------------------------------------------------------------------

    async def _drive(self, steps: Steps[_T]) -> _T:
        """Play a call written as steps (``_front``): await each reply, and what user code
        returns when it is awaitable."""
        play = Play(steps)
        step = play.next()
        while step is not None:
            try:
                if isinstance(step, Ask):
                    play.answer(await self._perform(step.request, step.timeout))
                else:
                    value = step.code()
                    play.answer(await value if inspect.isawaitable(value) else value)
            except Exception as exc:
                play.fail(exc)
            step = play.next()
        return cast(_T, play.result)

    async def _perform(self, request: Request[_T], timeout: Optional[float]) -> _T:
        limit = self._limit(request, timeout)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while True:
            started = None
            while started is None:
                await self._wait_until_connected(request.op, deadline)
                waiter: "asyncio.Future[_T]" = loop.create_future()
                started = self._start(request, waiter)
            generation, request_id, data = started
            try:
                await self._send(data, generation)
                return await asyncio.wait_for(waiter, max(0.0, deadline - loop.time()))
            except asyncio.TimeoutError:
                raise timed_out(request, limit) from None
            except ConnectionLost:
                # A keyed request goes out again on the new connection, with the same bytes.
                if not self._resends(request, generation):
                    raise
            finally:
                self._session.cancel(request_id)

    async def _send(self, data: bytes, generation: int) -> None:
        if self._closed or self._session.lost or self._session.generation != generation:
            raise self._session.lost_error()
        writer = self._writer
        writer.write(data)
        try:
            async with self._drain_lock:
                await asyncio.wait_for(writer.drain(), self.timeout)
        except (OSError, asyncio.TimeoutError) as exc:
            # Unsent bytes leave the stream out of step: the connection is done for.
            self._connection_ended(generation, f"send failed: {exc!r}")
            writer.close()
            raise self._session.lost_error() from exc

    async def _send_answer(self, data: bytes, generation: int) -> None:
        try:
            await self._send(data, generation)
        except ConnectionLost as exc:
            logger.debug("notifbus: answer not sent: %s", exc)

    async def _read_loop(
        self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter, decoder: FrameDecoder, generation: int
    ) -> None:
        reason = "broker closed the connection"
        try:
            while True:
                hand_over(self._session, decoder, lambda work: self._dispatch(work, generation))
                data = await stream.read(READ_SIZE)
                if not data:
                    break
                decoder.feed(data)
        except Exception as exc:  # a bug here must not leave callers hanging either
            reason = read_failure(exc, "task")
        finally:
            self._reader_ended(generation, reason)
            writer.close()

    def _dispatch(self, work: Work, generation: int) -> None:
        task = asyncio.get_running_loop().create_task(self._run(work, generation))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, work: Work, generation: int) -> None:
        data = await self._drive(work_steps(self._session, work))
        if data is not None:
            await self._send_answer(data, generation)


class MethodChannel(MethodChannelFront, Tasks):
    """A named channel for method calls between processes, as Flutter's ``MethodChannel``:
    ``invoke_method`` and ``set_method_call_handler``, written once in ``_front``."""

    _client: Client
