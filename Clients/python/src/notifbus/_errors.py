"""Exceptions raised by the notifbus client.

Holds the exception classes and nothing else; mapping wire errors to these classes
happens in ``_session``.
"""

from __future__ import annotations

from typing import Any, Optional


class _Absent:
    """Type of :data:`ABSENT`, the marker for a field that a frame does not carry."""

    _instance: Optional[_Absent] = None

    def __new__(cls) -> _Absent:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "notifbus.ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self) -> str:
        return "ABSENT"


#: Marks an optional wire field as absent, as opposed to present with value ``null``.
ABSENT = _Absent()


class NotifbusError(Exception):
    """Base class of every exception this package raises on its own."""


class BrokerError(NotifbusError):
    """The broker answered a request with an error reply.

    ``code`` is the wire error code (``"bad_request"``, ``"not_found"``, ...),
    ``message`` its text, ``details`` the optional ``details`` value (``None`` when the
    reply carried none). ``has_details`` tells an absent ``details`` from a ``null`` one.
    ``repeat`` is True when the reply was marked ``repeat``: the stored outcome of an
    earlier request with the same ``once`` key (``interrupted`` always is).
    """

    def __init__(self, code: str, message: str, details: Any = ABSENT) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message
        self.has_details = details is not ABSENT
        self.details: Any = None if details is ABSENT else details
        self.repeat = False

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def to_wire(self) -> dict[str, Any]:
        """The error as a wire ``error`` object, ``details`` only when it was given."""
        error: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.has_details:
            error["details"] = self.details
        return error


class MethodCallError(BrokerError):
    """An error result of a method call, as Flutter's ``PlatformException``.

    ``invoke_method`` raises it for every error reply, whether the handler or the
    broker (``handler_gone``, ``timeout``, ...) produced it. A method call handler
    raises it to return an error with its own ``code``, ``message`` and ``details``.
    Leave ``details`` out to send no ``details`` field; pass ``None`` to send
    ``"details": null``.
    """


class MissingPluginError(MethodCallError):
    """No handler implements the method: the error code is ``not_implemented``.

    Raised by ``invoke_method``; a handler may raise it (or ``NotImplementedError``)
    to answer ``not_implemented`` itself.
    """

    def __init__(self, message: str = "method not implemented", details: Any = ABSENT) -> None:
        super().__init__("not_implemented", message, details)


class ConnectionLost(NotifbusError, ConnectionError):
    """The connection to the broker is gone, or was closed by this client.

    Every call still waiting fails with it, and every later call too. ``reason`` is
    the broker's error frame that preceded the close (``forbidden``,
    ``too_many_clients``, ``frame_too_large``, ...), if there was one.
    """

    def __init__(self, message: str, reason: Optional[BrokerError] = None) -> None:
        super().__init__(message)
        self.reason = reason


class RequestTimeout(NotifbusError, TimeoutError):
    """No reply came within the call's timeout.

    The connection stays usable; a reply that comes later is dropped.
    """


class ProtocolViolation(NotifbusError):
    """The broker sent bytes that break the framing or the message format."""
