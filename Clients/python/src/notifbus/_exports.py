"""The names :mod:`notifbus` and :mod:`notifbus.aio` both export besides their own
``Client``, ``MethodChannel`` and ``connect``: the exceptions, the verdicts and the values
calls return. Names only; it defines nothing.
"""

from __future__ import annotations

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
from ._reconnect import ConnectionState
from ._types import NEXT, STOP, Complete, Event, Eviction, PostResult, PutResult, TraceEntry

__all__ = [
    "ABSENT",
    "NEXT",
    "STOP",
    "BrokerError",
    "Complete",
    "ConnectionLost",
    "ConnectionState",
    "Event",
    "Eviction",
    "MethodCallError",
    "MissingPluginError",
    "NotifbusError",
    "PostResult",
    "ProtocolViolation",
    "PutResult",
    "RequestTimeout",
    "TraceEntry",
]
