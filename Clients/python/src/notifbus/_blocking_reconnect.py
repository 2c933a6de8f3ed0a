"""Reconnection for the blocking client: after the connection is lost, connect again with
growing delays, greet, make every live observer and handler again, then let waiting
requests go out.

It runs on a thread of its own and never re-sends a request the application made: those
in flight at the loss have already failed with ``ConnectionLost`` (a keyed one, failed so,
is sent again by the call that made it, ``_front.ClientFront._resends``).
"""

from __future__ import annotations

import logging
import socket as _socket
import threading
import time
from concurrent.futures import Future
from concurrent.futures import TimeoutError as _FutureTimeout
from typing import TYPE_CHECKING, Any, Callable, List, Optional, Tuple

from ._errors import ConnectionLost, NotifbusError, RequestTimeout
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
    from ._blocking import Client

logger = logging.getLogger("notifbus")


class BlockingReconnect:
    """Mixed into :class:`notifbus.Client`; uses its socket, session and locks."""

    def _connection_ended(self: "Client", generation: int, reason: str) -> None:
        """Called by the reader of ``generation`` when its connection is gone."""
        with self._state:
            if generation != self._session.generation:
                return
            already = self._reconnecting
            start = False
            if not already:
                observers, handlers = self._session.live_registrations()
                live = self._registry.keep_live(observers, handlers)
                start = not self._closed and wants_reconnect(
                    self._reconnect, live, self._registry, self._session, self._resend_keyed
                )
                self._reconnecting = start
        # Requests made from here on wait for the new connection instead of failing.
        self._session.connection_lost(reason)
        with self._state:
            self._state.notify_all()  # wait_closed: ended, unless reconnecting
        if start:
            threading.Thread(
                target=self._reconnect_loop, args=(reason,), name="notifbus-reconnect", daemon=True
            ).start()

    def _wait_until_connected(self: "Client", op: str, deadline: float) -> None:
        with self._state:
            while self._reconnecting and not self._closed:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise RequestTimeout(f"{op} not sent: the broker is unreachable (reconnecting)")
                self._state.wait(remaining)

    def _may_wait_for_reconnect(self: "Client") -> bool:
        with self._state:
            return self._reconnecting and not self._closed

    def _internal_request(self: "Client", request: Request[Any], generation: int) -> "Future[Any]":
        waiter: "Future[Any]" = Future()
        with self._session._lock:
            if self._session.generation != generation:
                raise ConnectionLost("the connection was replaced")
            _, data = self._session.start(request, waiter)
        self._send(data, generation)
        return waiter

    def _notify_state(self: "Client", state: ConnectionState) -> None:
        callback = self.on_connection_state
        if callback is None:
            return
        try:
            callback(state)
        except Exception:
            logger.exception("notifbus: on_connection_state callback failed")

    def _reconnect_loop(self: "Client", reason: str) -> None:
        self._notify_state(ConnectionState("disconnected", reason=reason))
        for delay in retry_delays():
            with self._state:
                if delay > 0 and not self._closed:
                    self._state.wait(delay)
                if self._closed:
                    return
            sock = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                sock.connect(self.socket_path)
            except OSError:
                sock.close()
                continue
            with self._send_lock:
                if self._closed:
                    sock.close()
                    return
                self._sock = sock
                generation = self._session.begin_connection()
                # Started before it is published: close() joins whichever reader it sees.
                reader = threading.Thread(
                    target=self._read_loop, args=(sock, generation), name="notifbus-reader", daemon=True
                )
                reader.start()
                self._reader = reader
            outcome = self._resume(generation)
            if outcome is None:
                try:
                    sock.shutdown(_socket.SHUT_RDWR)
                except OSError:
                    pass
                continue
            state, evictions = outcome
            with self._state:
                if self._closed:
                    return
                if self._session.lost or self._session.generation != generation:
                    continue
                self._reconnecting = False
                self._state.notify_all()
            self._notify_state(state)
            for eviction, callback in evictions:
                self._dispatch(NotifyEviction(eviction, callback), generation)
            return

    def _resume(
        self: "Client", generation: int
    ) -> Optional[Tuple[ConnectionState, List[Tuple[Eviction, Callable[[Eviction], Any]]]]]:
        """Greet and replay on the new connection; None when it failed on the way."""
        try:
            self._internal_request(self._session.hello(self._name), generation).result(self.timeout)
            replays = [
                (entry, self._internal_request(request, generation))
                for entry, request in replay_requests(self._session, self._registry.entries())
            ]
            monitor = self._internal_request(monitor_request(), generation) if self._registry.monitoring else None
            results: List[Tuple[Registration, Any]] = []
            if monitor is not None:
                monitor.result(self.timeout)
            for entry, waiter in replays:
                try:
                    results.append((entry, waiter.result(self.timeout)))
                except ConnectionLost:
                    raise
                except NotifbusError as exc:
                    results.append((entry, exc))
        except (NotifbusError, OSError, _FutureTimeout) as exc:
            logger.debug("notifbus: reconnect attempt failed: %r", exc)
            return None
        return settle_all(self._registry, results)
