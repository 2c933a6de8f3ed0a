"""Python client for notifbus, the broker that shares one notification delegate
across processes (protocol v1).

This module is the blocking API; :mod:`notifbus.aio` has the same names for asyncio.
Durations are seconds (floats) everywhere: ``timeout=``, ``take``'s ``wait``::

    import notifbus

    with notifbus.connect(name="mail-app") as bus:
        bus.add_observer("didReceive", lambda event: notifbus.Complete(None), priority=10)
        result = bus.post("ping-event", {"n": 1})
"""

from __future__ import annotations

from . import _exports
from ._blocking import Client, MethodChannel, connect
from ._exports import *  # noqa: F401,F403  (the names notifbus.aio exports too)
from ._front import DEFAULT_TIMEOUT
from ._paths import resolve_socket_path
from ._session import HANDLER_EXCEPTION_CODE, PROTOCOL_VERSION
from ._types import SeenFrame, Verdict
from .profile import (
    ACTIVATION_WAIT,
    DEFAULT_ACTION_IDENTIFIER,
    DISMISS_ACTION_IDENTIFIER,
    HANDLED,
    LAUNCH_SLOT,
    PASS,
    PRESENTATION_OPTIONS,
    AppStart,
    Notification,
    NotificationContent,
    NotificationResponse,
    presentation_options,
)

__version__ = "0.1.0"

__all__ = [
    "ACTIVATION_WAIT",
    "AppStart",
    "DEFAULT_ACTION_IDENTIFIER",
    "DISMISS_ACTION_IDENTIFIER",
    "HANDLED",
    "LAUNCH_SLOT",
    "PASS",
    "PRESENTATION_OPTIONS",
    "Notification",
    "NotificationContent",
    "NotificationResponse",
    "SeenFrame",
    "presentation_options",
    "DEFAULT_TIMEOUT",
    "HANDLER_EXCEPTION_CODE",
    "PROTOCOL_VERSION",
    "Client",
    "MethodChannel",
    "Verdict",
    "connect",
    "resolve_socket_path",
]
__all__ += _exports.__all__
