"""What the Python clients need to outlive the broker: the ordered list of the
application's observers and handlers, the retry delays, and the replay requests.

No sockets, threads or event loops here; the blocking and asyncio clients carry the
replay. Of the requests the application made, only those with an idempotency key are
ever sent again (PROTOCOL.md §13, 40).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Tuple

from ._errors import BrokerError
from ._session import Request, Session
from ._types import Eviction

#: The first retry comes at once; each later one waits this much longer than the last.
FIRST_DELAY = 0.01
GROWTH = 1.5
#: Retries never wait longer than this, so a restarted broker is found within a second.
MAX_DELAY = 1.0

#: The error a resumed registration gets when a newer one holds its key or route.
SUPERSEDED = "superseded"


def retry_delays(rng: Optional[random.Random] = None) -> Iterator[float]:
    """Seconds to wait before each connection attempt: 0, then about 10 ms growing
    by half each time up to 1 s, each scaled by a random 75-100 % (jitter, so that
    many clients do not knock at the same instant)."""
    rng = rng or random.Random()
    yield 0.0
    delay = FIRST_DELAY
    while True:
        yield delay * (0.75 + 0.25 * rng.random())
        delay = min(MAX_DELAY, delay * GROWTH)


@dataclass(frozen=True)
class ConnectionState:
    """A change of the connection, as told to ``on_connection_state``.

    ``state`` is ``"disconnected"`` (with ``reason``) or ``"reconnected"`` (with
    ``ids``: each live observer's or handler's id as the application first got it,
    mapped to its id on the new connection, and ``superseded``: the ones that found
    their key or route taken by a newer registration and were dropped).
    """

    state: str
    reason: str = ""
    ids: Dict[str, str] = field(default_factory=dict)
    superseded: List[str] = field(default_factory=list)


@dataclass
class Registration:
    """One observer or handler the application made, as it must be made again."""

    kind: str  # "observer" or "handler"
    handle: str  # the id the application got first; it stays valid
    current: str  # the broker's id on the present connection
    handler: Callable[..., Any]
    on_evicted: Optional[Callable[[Eviction], Any]]
    events: List[str] = field(default_factory=list)
    priority: int = 100
    key: Optional[str] = None
    channel: str = ""
    method: Optional[str] = None


class Registry:
    """The application's registrations in the order it made them. Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: List[Registration] = []
        #: Set once the application started a monitor: it is started again too.
        self.monitoring = False

    def add(self, entry: Registration) -> None:
        with self._lock:
            if entry.kind == "handler":
                # A new handler of ours for the same route replaced the old one.
                self._entries = [
                    e
                    for e in self._entries
                    if not (e.kind == "handler" and (e.channel, e.method) == (entry.channel, entry.method))
                ]
            self._entries.append(entry)

    def current(self, handle: str) -> str:
        """The present broker id of a handle; other ids are returned unchanged."""
        with self._lock:
            for e in self._entries:
                if e.handle == handle:
                    return e.current
        return handle

    def handles(self, ids: List[str]) -> List[str]:
        """Broker ids turned back into the application's handles, where they are ours."""
        with self._lock:
            by_current = {e.current: e.handle for e in self._entries}
        return [by_current.get(i, i) for i in ids]

    def forget(self, ids: List[str]) -> None:
        with self._lock:
            self._entries = [e for e in self._entries if e.current not in ids]

    def entries(self) -> List[Registration]:
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def keep_live(self, observers: List[str], handlers: List[str]) -> List[Registration]:
        """Drop what the lost connection no longer held (evicted, removed); return the rest."""
        live = set(observers) | set(handlers)
        with self._lock:
            self._entries = [e for e in self._entries if e.current in live]
            return list(self._entries)


def registered(
    request: Request[str],
    registry: Registry,
    kind: str,
    handler: Any,
    on_evicted: Optional[Callable[[Eviction], Any]],
    **where: Any,
) -> Request[str]:
    """``request`` (a ``subscribe`` or ``handle``) that also records its registration in
    ``registry`` the moment its reply is read, so that a reconnect can make it again."""
    made = request.on_result

    def on_result(result: Any) -> str:
        made_id = made(result)
        registry.add(Registration(kind, made_id, made_id, handler, on_evicted, **where))
        return made_id

    request.on_result = on_result
    return request


def wants_reconnect(
    setting: Optional[bool], live: List[Registration], registry: Registry, session: Session, resend_keyed: bool = False
) -> bool:
    """Whether a client that lost its connection (and was not closed) connects again:
    always when ``setting`` is True, never when False, and by default (None) when it
    holds observers, handlers or a monitor, was waiting in a ``take``, or (with
    ``resend_keyed``) had a keyed request in flight, which goes out again."""
    if setting is not None:
        return setting
    return (
        bool(live)
        or registry.monitoring
        or "take" in session.pending_ops()
        or (resend_keyed and session.pending_keyed())
    )


def replay_requests(session: Session, entries: List[Registration]) -> List[Tuple[Registration, Request[str]]]:
    """The ``subscribe`` and ``handle`` requests, marked ``resume``, that make every
    entry again on ``session``'s new connection, in order."""
    out: List[Tuple[Registration, Request[str]]] = []
    for e in entries:
        if e.kind == "observer":
            request = session.subscribe(e.events, e.handler, e.priority, e.key, e.on_evicted, resume=True)
        else:
            request = session.handle(e.channel, e.method, e.handler, e.on_evicted, resume=True)
        out.append((e, request))
    return out


def monitor_request() -> Request[Any]:
    """The ``monitor`` request that starts a monitor again on a new connection."""
    return Request("monitor", {})


def settle(
    registry: Registry,
    entry: Registration,
    outcome: Any,
    state: ConnectionState,
    evictions: List[Tuple[Eviction, Callable[[Eviction], Any]]],
) -> None:
    """Record the outcome of one replay: the new id, or a superseded (or refused)
    registration, which is dropped and reported as an eviction by its holder."""
    if isinstance(outcome, str):
        state.ids[entry.handle] = outcome
        entry.current = outcome
        return
    registry.forget([entry.current])
    by = ""
    if isinstance(outcome, BrokerError) and outcome.code == SUPERSEDED and isinstance(outcome.details, dict):
        by = str(outcome.details.get("by", ""))
    state.superseded.append(entry.handle)
    if entry.on_evicted is not None:
        evictions.append((Eviction(entry.kind, entry.current, by), entry.on_evicted))


def settle_all(
    registry: Registry, results: List[Tuple[Registration, Any]]
) -> Tuple[ConnectionState, List[Tuple[Eviction, Callable[[Eviction], Any]]]]:
    """The ``reconnected`` state of a replay whose every outcome is in ``results``, and the
    evictions to report for the registrations that were superseded."""
    state = ConnectionState("reconnected")
    evictions: List[Tuple[Eviction, Callable[[Eviction], Any]]] = []
    for entry, result in results:
        settle(registry, entry, result, state, evictions)
    return state, evictions
