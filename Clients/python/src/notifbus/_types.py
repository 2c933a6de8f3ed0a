"""Values that cross the public API: events, observer verdicts, results.

Plain immutable data; building them from frames happens in ``_session``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, List, Optional, Union


class _Next:
    """Type of :data:`NEXT`."""

    def __repr__(self) -> str:
        return "notifbus.NEXT"


class _Stop:
    """Type of :data:`STOP`."""

    def __repr__(self) -> str:
        return "notifbus.STOP"


#: Observer verdict: pass the event on to the next observer of the chain.
NEXT = _Next()

#: Observer verdict: end the chain here, without a value.
STOP = _Stop()


@dataclass(frozen=True)
class Complete:
    """Observer verdict: end the chain here and hand ``value`` to the poster.

    For ``willPresent`` the value must be a list of distinct presentation options
    (``"badge"``, ``"sound"``, ``"list"``, ``"banner"``, ``"alert"``).
    """

    value: Any = None


#: What an observer handler returns. ``None`` counts as :data:`NEXT`.
Verdict = Union[_Next, _Stop, Complete, None]


@dataclass(frozen=True)
class Event:
    """One hop of an event's chain, as delivered to an observer handler."""

    #: The event name, e.g. ``"didReceive"``.
    name: str
    #: The posted payload (any JSON value; ``None`` when the poster gave none).
    payload: Any
    #: The broker's integer id of this event.
    event: int
    #: The id of the observer this hop is for (``"o4"``).
    observer: str


@dataclass(frozen=True)
class TraceEntry:
    """One hop of a finished chain: the observer and how its hop ended.

    ``reply`` is ``"next"``, ``"complete"``, ``"stop"``, ``"gone"``, ``"timeout"``,
    ``"invalid"`` or ``"skipped"`` (not sent the event: its connection's hops in this
    event had already taken a hop timeout).
    """

    observer: str
    reply: str


@dataclass(frozen=True)
class PostResult:
    """The result of :meth:`post`: how the event's chain ended."""

    #: The broker's integer id of the event.
    event: int
    #: ``"completed"``, ``"stopped"`` or ``"unhandled"``.
    outcome: str
    #: The observer that completed or stopped the chain, else ``None``.
    by: Optional[str]
    #: The ``complete`` value, else ``None``.
    value: Any
    #: The slot the payload was retained in (``"launch"``), else ``None``.
    retained: Optional[str]
    #: Every hop, in chain order.
    trace: List[TraceEntry] = field(default_factory=list)
    #: The result of an earlier post with the same ``once`` key, not of a new event.
    repeat: bool = False


@dataclass(frozen=True)
class PutResult:
    """The result of :meth:`put`."""

    #: The slot held a value before this put.
    replaced: bool
    #: The value went straight to a waiting ``take``; the slot stays empty.
    delivered: bool
    #: The result of an earlier put with the same ``once`` key: this one changed nothing.
    repeat: bool = False


@dataclass(frozen=True)
class Eviction:
    """Another registration took this one's key; passed to ``on_evicted`` callbacks."""

    #: ``"observer"`` or ``"handler"``.
    kind: str
    #: The id of the registration that was removed (``"o1"`` or ``"h1"``).
    id: str
    #: The id of the registration that replaced it.
    by: str


@dataclass(frozen=True)
class SeenFrame:
    """One frame the broker read (``direction`` ``"in"``) from or wrote (``"out"``) to
    ``client``, as a ``monitor`` sees it; ``frame`` is the decoded JSON."""

    direction: str
    client: str
    frame: Any
