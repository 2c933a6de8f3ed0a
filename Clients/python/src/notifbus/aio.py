"""The asyncio client: the same API as :mod:`notifbus`, with coroutines.

Carries the frames of a ``Session`` over an asyncio Unix stream. One reader task reads
and matches replies; every handler runs as a task of its own, so a slow handler holds
up nothing else on the connection. Everything runs on the loop that connected.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import socket as _socket
import time
from types import TracebackType
from typing import Any, Awaitable, Callable, Coroutine, Dict, Iterable, List, Optional, Set, Type, TypeVar, Union

from ._errors import (
    ABSENT,
    BrokerError,
    ConnectionLost,
    MethodCallError,
    MissingPluginError,
    NotifbusError,
    ProtocolViolation,
    RequestTimeout,
)
from ._aio_reconnect import AsyncReconnect
from ._framing import FrameDecoder
from ._paths import resolve_socket_path, socket_error
from ._reconnect import ConnectionState, Registry, registered
from ._session import (
    DeliverCall,
    DeliverEvent,
    NotifyEviction,
    Request,
    SendFrame,
    Session,
    Work,
    StatusPages,
    status_time_left,
)
from ._types import NEXT, STOP, Complete, Event, Eviction, PostResult, PutResult, SeenFrame, TraceEntry, Verdict
from .profile import AsyncProfile

__all__ = [
    "ABSENT",
    "NEXT",
    "STOP",
    "BrokerError",
    "Client",
    "Complete",
    "ConnectionLost",
    "ConnectionState",
    "Event",
    "Eviction",
    "MethodCallError",
    "MethodChannel",
    "MissingPluginError",
    "NotifbusError",
    "PostResult",
    "ProtocolViolation",
    "PutResult",
    "RequestTimeout",
    "TraceEntry",
    "connect",
]

logger = logging.getLogger("notifbus")

_T = TypeVar("_T")

#: Default bound, in seconds, on every wait of a client: connecting and each reply.
DEFAULT_TIMEOUT = 60.0

#: Bytes asked of the stream per read.
_READ_SIZE = 65536

ObserverHandler = Callable[[Event], Union[Verdict, Awaitable[Verdict]]]
MethodCallHandler = Callable[[str, Any], Any]
EvictionCallback = Callable[[Eviction], Any]


async def connect(
    socket: Optional[Union[str, "os.PathLike[str]"]] = None,
    name: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    reconnect: Optional[bool] = None,
    on_connection_state: Optional[Callable[[ConnectionState], Any]] = None,
) -> Client:
    """Connect to the broker, say ``hello`` and return a ready :class:`Client`.

    Same arguments and errors as :func:`notifbus.connect`, reconnection included;
    ``on_connection_state`` may be a coroutine function. Use the client with
    ``async with``.
    """
    path = resolve_socket_path(socket)
    loop = asyncio.get_running_loop()
    sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    sock.setblocking(False)
    session = Session()
    decoder = FrameDecoder()
    try:
        try:
            await asyncio.wait_for(_greet(loop, sock, path, session, decoder, name), timeout)
        except asyncio.TimeoutError:
            raise RequestTimeout(f"no answer to hello from {path} within {timeout:g} s") from None
        reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(sock=sock), timeout)
    except BaseException:
        sock.close()
        raise
    client = Client(reader, writer, path, timeout, session, decoder)
    client._name = name
    client._reconnect = reconnect
    client.on_connection_state = on_connection_state
    return client


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
            chunk = await loop.sock_recv(sock, _READ_SIZE)
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


class Client(AsyncReconnect, AsyncProfile):
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
    def client_id(self) -> Optional[str]:
        """The broker's id for this connection (``"c7"``)."""
        return self._session.client_id

    @property
    def server(self) -> Optional[str]:
        """The broker's version string (``"notifbus/<version>"``)."""
        return self._session.server

    @property
    def max_frame(self) -> int:
        """The largest frame the broker accepts, in bytes."""
        return self._session.max_frame

    @property
    def connected(self) -> bool:
        """False once the connection is closed or lost, and while reconnecting."""
        return not self._session.lost and not self._reconnecting

    def current_id(self, handle: str) -> str:
        """As :meth:`notifbus.Client.current_id`."""
        return self._registry.current(handle)

    async def close(self) -> None:
        """Close the connection. Pending calls fail with ``ConnectionLost`` and running
        handler tasks are cancelled. Idempotent."""
        if self._closed:
            return
        self._closed = True
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
        """Wait until the connection has closed (by :meth:`close`, by the broker or by
        a failure); bound it with ``asyncio.wait_for`` where needed."""
        await asyncio.gather(asyncio.shield(self._reader_task), return_exceptions=True)

    async def run_forever(self) -> None:
        """Serve observers and handlers until the connection ends: what an observer
        process awaits after registering, instead of a polling loop. Returns when
        :meth:`close` was called; raises ``ConnectionLost`` when the broker closed the
        connection or it failed."""
        await self.wait_closed()
        if not self._closed:
            raise self._session.lost_error()

    async def monitor(self, callback: Callable[[SeenFrame], Any], *, timeout: Optional[float] = None) -> None:
        """Mirror every frame the broker exchanges with other clients: ``callback`` (a
        plain function, run on the loop in order) gets each :class:`SeenFrame`."""
        self._session.monitor_callback = callback
        await self._perform(self._session.monitor(), timeout)
        # A reconnect starts the monitor again on the new connection.
        self._registry.monitoring = True

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        traceback: Optional[TracebackType],
    ) -> None:
        await self.close()

    async def ping(self, *, timeout: Optional[float] = None) -> None:
        """Round-trip a ``ping`` to the broker."""
        await self._perform(self._session.ping(), timeout)

    # -- observers --------------------------------------------------------------------

    async def add_observer(
        self,
        events: Union[str, Iterable[str]],
        handler: ObserverHandler,
        priority: int = 100,
        key: Optional[str] = None,
        *,
        on_evicted: Optional[EvictionCallback] = None,
        timeout: Optional[float] = None,
    ) -> str:
        """Subscribe ``handler`` to one event name or several; return the observer id.

        As :meth:`notifbus.Client.add_observer`. ``handler`` may be a coroutine
        function; a plain function runs on the loop and must not block. Each event
        runs in a task of its own. ``on_evicted`` may be a coroutine function too.
        """
        names = [events] if isinstance(events, str) else list(events)
        request = registered(self._session.subscribe(names, handler, priority, key, on_evicted), self._registry,
                             "observer", handler, on_evicted, events=names, priority=priority, key=key)
        return await self._perform(request, timeout)

    async def remove_observer(self, observer_id: str, *, timeout: Optional[float] = None) -> List[str]:
        """Remove an observer (of any connection) by id; return the removed ids."""
        removed = await self._perform(self._session.unsubscribe(observer=self._registry.current(observer_id)), timeout)
        handles = self._registry.handles(removed)
        self._registry.forget(removed)
        return handles

    async def remove_observer_by_unique_key(self, key: str, *, timeout: Optional[float] = None) -> List[str]:
        """Remove the observer holding ``key``; return the removed ids."""
        removed = await self._perform(self._session.unsubscribe(key=key), timeout)
        handles = self._registry.handles(removed)
        self._registry.forget(removed)
        return handles

    async def post(self, name: str, payload: Any = None, *, timeout: Optional[float] = None) -> PostResult:
        """Post an event and wait until its chain has run; return the :class:`PostResult`."""
        return await self._perform(self._session.post(name, payload), timeout)

    # -- method channels --------------------------------------------------------------

    def method_channel(self, name: str) -> MethodChannel:
        """A :class:`MethodChannel` named ``name`` on this connection."""
        return MethodChannel(self, name)

    # -- slots ------------------------------------------------------------------------

    async def put(self, slot: str, value: Any, *, timeout: Optional[float] = None) -> PutResult:
        """Put ``value`` in ``slot`` (``None`` empties it); a waiting ``take`` gets it at once."""
        return await self._perform(self._session.put(slot, value), timeout)

    async def take(self, slot: str, wait: Optional[float] = None, *, timeout: Optional[float] = None) -> Any:
        """Take the value out of ``slot``, or ``None`` if it is empty.

        With ``wait`` (seconds, up to 600), an empty slot is waited on that long for a
        ``put``. The call's timeout is ``timeout`` plus ``wait``.
        """
        return await self._perform(self._session.take(slot, wait), timeout)

    async def peek(self, slot: str, *, timeout: Optional[float] = None) -> Any:
        """The value in ``slot``, left in place, or ``None`` if it is empty."""
        return await self._perform(self._session.peek(slot), timeout)

    # -- notification profile and introspection --------------------------------------

    async def set_notification_categories(
        self, categories: Iterable[Dict[str, Any]], *, timeout: Optional[float] = None
    ) -> int:
        """Replace the notification categories (dicts as in protocol §3.6); return their count."""
        return await self._perform(self._session.set_categories(categories), timeout)

    async def notification_categories(self, *, timeout: Optional[float] = None) -> List[Dict[str, Any]]:
        """The notification categories in force, exactly as they were set."""
        return await self._perform(self._session.get_categories(), timeout)

    async def status(self, *, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The broker's status object (clients, observers, handlers, queue, slots, buffers,
        counters). A large status comes in pages; this asks for each in turn and returns
        them merged; ``timeout`` bounds the whole walk."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        pages = StatusPages(await self._perform(self._session.status(), limit))
        while pages.next is not None:
            pages.add(await self._perform(self._session.status(pages.next), status_time_left(deadline, limit)))
        return pages.whole()

    # -- plumbing ---------------------------------------------------------------------

    async def _perform(self, request: Request[_T], timeout: Optional[float]) -> _T:
        limit = (self.timeout if timeout is None else timeout) + request.extra_wait
        loop = asyncio.get_running_loop()
        deadline = loop.time() + limit
        while True:
            await self._wait_until_connected(request.op, deadline)
            waiter: "asyncio.Future[_T]" = loop.create_future()
            try:
                generation = self._session.generation
                request_id, data = self._session.start(request, waiter)
                break
            except ConnectionLost:
                if not self._may_wait_for_reconnect():
                    raise
        try:
            await self._send(data, generation)
            return await asyncio.wait_for(waiter, max(0.0, deadline - loop.time()))
        except asyncio.TimeoutError:
            raise RequestTimeout(f"no reply to {request.op} within {limit:g} s") from None
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

    async def _read_loop(self, stream: asyncio.StreamReader, writer: asyncio.StreamWriter,
                         decoder: FrameDecoder, generation: int) -> None:
        reason = "broker closed the connection"
        try:
            while True:
                while True:
                    frame = decoder.next_frame()
                    if frame is None:
                        break
                    work = self._session.receive(frame)
                    if work is not None:
                        self._dispatch(work, generation)
                data = await stream.read(_READ_SIZE)
                if not data:
                    break
                decoder.feed(data)
        except ProtocolViolation as exc:
            reason = f"broker broke the protocol: {exc}"
        except OSError as exc:
            reason = f"connection error: {exc}"
        except Exception as exc:  # a bug here must not leave callers hanging
            logger.exception("notifbus: reader task failed")
            reason = f"reader failed: {exc!r}"
        finally:
            if self._closed:
                reason = "connection closed by the client"
            self._connection_ended(generation, reason)
            writer.close()

    def _dispatch(self, work: Work, generation: int) -> None:
        coroutine: Coroutine[Any, Any, None]
        if isinstance(work, SendFrame):
            coroutine = self._send_answer(work.data, generation)
        else:
            coroutine = self._run(work, generation)
        task = asyncio.get_running_loop().create_task(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _run(self, work: Work, generation: int) -> None:
        session = self._session
        if isinstance(work, DeliverEvent):
            try:
                verdict = work.handler(work.event)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as exc:
                data = session.answer_failure(work.event.event, exc)
            else:
                data = session.answer(work.event.event, verdict)
            await self._send_answer(data, generation)
        elif isinstance(work, DeliverCall):
            try:
                result = work.handler(work.method, work.arguments)
                if inspect.isawaitable(result):
                    result = await result
            except Exception as exc:
                data = session.method_failure(work.call, exc)
            else:
                data = session.method_return(work.call, result)
            await self._send_answer(data, generation)
        elif isinstance(work, NotifyEviction):
            try:
                outcome = work.callback(work.eviction)
                if inspect.isawaitable(outcome):
                    await outcome
            except Exception:
                logger.exception("notifbus: on_evicted callback failed for %s", work.eviction.id)


class MethodChannel:
    """A named channel for method calls between processes, as Flutter's ``MethodChannel``."""

    def __init__(self, client: Client, name: str) -> None:
        self._client = client
        #: The channel name.
        self.name = name

    async def invoke_method(self, method: str, arguments: Any = None, *, timeout: Optional[float] = None) -> Any:
        """Call ``method`` on whichever process handles it; return its result.

        Raises ``MissingPluginError`` for ``not_implemented`` and ``MethodCallError``
        for any other error reply, with ``code``, ``message`` and ``details`` unchanged.
        """
        request = self._client._session.invoke(self.name, method, arguments)
        return await self._client._perform(request, timeout)

    async def set_method_call_handler(
        self,
        handler: Optional[MethodCallHandler],
        method: Optional[str] = None,
        *,
        on_evicted: Optional[EvictionCallback] = None,
        timeout: Optional[float] = None,
    ) -> Optional[str]:
        """Handle calls of ``method`` (or of the whole channel when ``None``); return the
        handler id. ``handler=None`` removes this connection's handler and returns ``None``.

        As :meth:`notifbus.MethodChannel.set_method_call_handler`: ``handler(method,
        arguments)`` gets the method name and the decoded arguments (``None`` when
        absent). It may be a coroutine function; a plain function runs on the loop and
        must not block. Each call runs in a task of its own.
        """
        client = self._client
        session = client._session
        if handler is None:
            current = session.current_handler(self.name, method)
            if current is not None:
                try:
                    await client._perform(session.unhandle(current), timeout)
                except BrokerError as exc:
                    if exc.code != "not_found":
                        raise
                    session.forget_handler(current)
                client._registry.forget([current])
            return None
        request = registered(session.handle(self.name, method, handler, on_evicted), client._registry,
                             "handler", handler, on_evicted, channel=self.name, method=method)
        return await client._perform(request, timeout)
