"""Reconnection for the asyncio client: after the connection is lost, connect again with
growing delays, greet, make every live observer and handler again, then let waiting
requests go out.

It runs as a task on the client's loop and never re-sends a request the application
made: those in flight at the loss have already failed with ``ConnectionLost`` (a keyed
one, failed so, is sent again by the call that made it, ``_front.ClientFront._resends``).
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import socket as _socket
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ._errors import ConnectionLost, NotifbusError, RequestTimeout
from ._framing import FrameDecoder
from ._reconnect import (
    ConnectionState,
    Registration,
    monitor_request,
    replay_requests,
    retry_delays,
    settle_all,
    wants_reconnect,
)
from ._session import NotifyEviction, Request
from ._types import Eviction

if TYPE_CHECKING:
    from .aio import Client

logger = logging.getLogger("notifbus")


class AsyncReconnect:
    """Mixed into :class:`notifbus.aio.Client`; uses its streams and session."""

    def _connection_ended(self: "Client", generation: int, reason: str) -> None:
        """Called by the reader task of ``generation`` when its connection is gone."""
        if generation != self._session.generation:
            return
        start = False
        if not self._reconnecting:
            observers, handlers = self._session.live_registrations()
            live = self._registry.keep_live(observers, handlers)
            start = not self._closed and wants_reconnect(
                self._reconnect, live, self._registry, self._session, self._resend_keyed
            )
            if start:
                self._reconnecting = True
                self._connected.clear()
        self._session.connection_lost(reason)
        if not self._reconnecting:
            self._ended.set()  # wait_closed: lost for good
        if start:
            task = asyncio.get_running_loop().create_task(self._reconnect_loop(reason))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _wait_until_connected(self: "Client", op: str, deadline: float) -> None:
        loop = asyncio.get_running_loop()
        while self._reconnecting and not self._closed:
            remaining = deadline - loop.time()
            if remaining <= 0:
                raise RequestTimeout(f"{op} not sent: the broker is unreachable (reconnecting)")
            try:
                await asyncio.wait_for(self._connected.wait(), remaining)
            except asyncio.TimeoutError:
                pass

    def _may_wait_for_reconnect(self: "Client") -> bool:
        return self._reconnecting and not self._closed

    async def _notify_state(self: "Client", state: ConnectionState) -> None:
        callback = self.on_connection_state
        if callback is None:
            return
        try:
            outcome = callback(state)
            if inspect.isawaitable(outcome):
                await outcome
        except Exception:
            logger.exception("notifbus: on_connection_state callback failed")

    async def _internal_request(self: "Client", request: Request[Any], generation: int) -> "asyncio.Future[Any]":
        waiter: "asyncio.Future[Any]" = asyncio.get_running_loop().create_future()
        if self._session.generation != generation:
            raise ConnectionLost("the connection was replaced")
        _, data = self._session.start(request, waiter)
        await self._send(data, generation)
        return waiter

    async def _reconnect_loop(self: "Client", reason: str) -> None:
        from .aio import _greet

        await self._notify_state(ConnectionState("disconnected", reason=reason))
        loop = asyncio.get_running_loop()
        for delay in retry_delays():
            if delay > 0:
                await asyncio.sleep(delay)
            if self._closed:
                return
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            sock.setblocking(False)
            generation = self._session.begin_connection()
            decoder = FrameDecoder()
            try:
                await asyncio.wait_for(
                    _greet(loop, sock, self.socket_path, self._session, decoder, self._name), self.timeout
                )
                reader, writer = await asyncio.wait_for(asyncio.open_unix_connection(sock=sock), self.timeout)
            except (NotifbusError, OSError, asyncio.TimeoutError) as exc:
                logger.debug("notifbus: reconnect attempt failed: %r", exc)
                self._session.connection_lost("reconnect attempt failed")
                sock.close()
                continue
            if self._closed:
                writer.close()
                return
            self._reader, self._writer, self._decoder = reader, writer, decoder
            self._reader_task = loop.create_task(self._read_loop(reader, writer, decoder, generation))
            outcome = await self._resume(generation)
            if outcome is None or self._session.lost or self._session.generation != generation:
                writer.close()
                continue
            state, evictions = outcome
            self._reconnecting = False
            self._connected.set()
            await self._notify_state(state)
            for eviction, callback in evictions:
                await self._run(NotifyEviction(eviction, callback), generation)
            return

    async def _resume(
        self: "Client", generation: int
    ) -> Optional[Tuple[ConnectionState, List[Tuple[Eviction, Callable[[Eviction], Any]]]]]:
        """Replay every registration on the new connection; None when it failed on the way."""
        try:
            replays = [
                (entry, await self._internal_request(request, generation))
                for entry, request in replay_requests(self._session, self._registry.entries())
            ]
            if self._registry.monitoring:
                await asyncio.wait_for(await self._internal_request(monitor_request(), generation), self.timeout)
            results: List[Tuple[Registration, Any]] = []
            for entry, waiter in replays:
                try:
                    results.append((entry, await asyncio.wait_for(waiter, self.timeout)))
                except ConnectionLost:
                    raise
                except NotifbusError as exc:
                    results.append((entry, exc))
        except (NotifbusError, OSError, asyncio.TimeoutError) as exc:
            logger.debug("notifbus: reconnect attempt failed: %r", exc)
            return None
        return settle_all(self._registry, results)
