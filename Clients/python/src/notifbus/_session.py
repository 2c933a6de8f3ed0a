"""The protocol state of one client connection, without any I/O.

Builds request frames, matches replies to waiters, keeps the observer and handler
registrations, and turns incoming ``event``/``call``/``evicted`` frames into work items.
It must not touch sockets, threads or event loops: the blocking and asyncio clients
carry its frames and run its work items.

Every method may be called from any thread; one reentrant lock guards the state.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from dataclasses import dataclass
from typing import (
    Any,
    Callable,
    Dict,
    Generic,
    Iterable,
    List,
    Optional,
    Protocol,
    Tuple,
    Type,
    TypeVar,
    Union,
)

from ._error_table import CLOSING_CODES
from ._errors import (
    ABSENT,
    BrokerError,
    ConnectionLost,
    MethodCallError,
    MissingPluginError,
    ProtocolViolation,
    RequestTimeout,
)
from ._framing import encode_frame
from ._types import Complete, Event, Eviction, PostResult, PutResult, SeenFrame, TraceEntry, _Next, _Stop

logger = logging.getLogger("notifbus")

_T = TypeVar("_T")

#: The protocol version this client speaks.
PROTOCOL_VERSION = 1

#: The broker's default ``--max-frame``; the limit for frames sent before ``hello``
#: tells the real one.
DEFAULT_MAX_FRAME = 1048576


#: The lists of a ``status`` result that continue on the page its ``next`` names.
STATUS_LISTS = ("clients", "observers", "handlers", "slots")


class StatusPages:
    """The pages of one ``status`` walk joined as they come, in time linear in their
    size: the lists grow, the figures (queue, counters, buffers, ``next``) are the
    latest page's."""

    def __init__(self, first: Dict[str, Any]) -> None:
        self._latest = first
        self._lists: Dict[str, List[Any]] = {name: list(first.get(name, [])) for name in STATUS_LISTS}

    @property
    def next(self) -> Optional[str]:
        """The cursor of the page still to read, or None when the walk is complete."""
        cursor = self._latest.get("next")
        return cursor if isinstance(cursor, str) else None

    def add(self, page: Dict[str, Any]) -> None:
        if page.get("next") is not None and page.get("next") == self._latest.get("next"):
            raise ProtocolViolation(f"status page {self._latest.get('next')!r} names itself as the next page")
        for name in STATUS_LISTS:
            self._lists[name].extend(page.get(name, []))
        self._latest = page

    def whole(self) -> Dict[str, Any]:
        joined = dict(self._latest)
        joined.update(self._lists)
        return joined


def status_time_left(deadline: float, limit: float) -> float:
    """What is left of a ``status`` walk's one bound; raises once it has passed."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise RequestTimeout(f"status: its pages were not all read within {limit} s")
    return left


#: The longest ``take`` wait, in seconds (the broker's limit of 10 minutes).
MAX_TAKE_WAIT = 600.0

#: Error code of a ``return`` for a handler exception that is not a ``MethodCallError``.
HANDLER_EXCEPTION_CODE = "error"


class Waiter(Protocol):
    """What the session needs of a future: ``concurrent.futures`` and ``asyncio`` alike."""

    def done(self) -> bool: ...

    def set_result(self, result: Any) -> None: ...

    def set_exception(self, exception: BaseException) -> None: ...


def _unchanged(result: Any) -> Any:
    return result


@dataclass
class Request(Generic[_T]):
    """A request ready to be sent, with the bookkeeping its reply triggers.

    ``on_result`` runs under the session lock when the reply arrives, before the
    waiter wakes, so a registration is in place before any frame that follows its
    reply is looked at. Its return value is what the API call returns.
    """

    op: str
    fields: Dict[str, Any]
    on_result: Callable[[Any], _T] = _unchanged
    error_type: Type[BrokerError] = BrokerError
    #: Seconds the reply may legitimately take on top of the call timeout (``take``).
    extra_wait: float = 0.0
    #: Runs under the lock once the request is registered.
    on_start: Optional[Callable[[], None]] = None
    #: Runs under the lock once the request is over: replied, timed out or lost.
    on_finish: Optional[Callable[[], None]] = None
    #: Builds the return value of a result marked ``repeat`` (a keyed request's first
    #: outcome); None: as ``on_result``.
    on_repeat: Optional[Callable[[Any], _T]] = None

    @property
    def keyed(self) -> bool:
        """Whether the request carries an idempotency key (``once``), so that sending it
        again cannot apply it twice."""
        return self.fields.get("once") is not None


@dataclass
class _Pending:
    request: Request[Any]
    waiter: Waiter


@dataclass
class _ObserverRecord:
    handler: Callable[..., Any]
    on_evicted: Optional[Callable[[Eviction], Any]]


@dataclass
class _HandlerRecord:
    channel: str
    method: Optional[str]
    handler: Callable[..., Any]
    on_evicted: Optional[Callable[[Eviction], Any]]

    @property
    def key(self) -> Tuple[str, Optional[str]]:
        return (self.channel, self.method)


@dataclass(frozen=True)
class SendFrame:
    """Work item: send this frame; no user code is involved."""

    data: bytes


@dataclass(frozen=True)
class DeliverEvent:
    """Work item: run an observer handler, then send ``Session.answer(...)``."""

    event: Event
    handler: Callable[..., Any]


@dataclass(frozen=True)
class DeliverCall:
    """Work item: run a method call handler, then send ``Session.method_return(...)``."""

    call: int
    channel: str
    method: str
    arguments: Any
    handler: Callable[..., Any]


@dataclass(frozen=True)
class NotifyEviction:
    """Work item: tell a registration's owner that it was evicted."""

    eviction: Eviction
    callback: Callable[[Eviction], Any]


Work = Union[SendFrame, DeliverEvent, DeliverCall, NotifyEviction]


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _id_and_names(frame: Dict[str, Any], op: str, first: str, second: str) -> Optional[Tuple[int, str, str]]:
    """An ``event`` or ``call`` frame's id (its field named as the op) and two string
    fields; None, logged, when one is missing or of another type."""
    frame_id, one, two = frame.get(op), frame.get(first), frame.get(second)
    if (
        not isinstance(frame_id, int)
        or isinstance(frame_id, bool)
        or not isinstance(one, str)
        or not isinstance(two, str)
    ):
        logger.warning("notifbus: ignoring malformed %s frame %r", op, frame)
        return None
    return frame_id, one, two


def error_from_wire(error: Any, error_type: Type[BrokerError] = BrokerError) -> BrokerError:
    """Build the exception for a wire ``error`` object.

    ``MethodCallError`` as ``error_type`` yields ``MissingPluginError`` for
    ``not_implemented``.
    """
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return error_type("bad_reply", f"malformed error object from the broker: {error!r}")
    code = error["code"]
    message = error.get("message")
    if not isinstance(message, str):
        message = ""
    details = error.get("details", ABSENT)
    if issubclass(error_type, MethodCallError) and code == "not_implemented":
        return MissingPluginError(message, details)
    return error_type(code, message, details)


def _keyed(fields: Dict[str, Any], once: Optional[str]) -> Dict[str, Any]:
    """``fields`` with ``once`` when given, before the body members that follow it."""
    if once is not None:
        fields["once"] = once
    return fields


def _post_result(result: Any, repeat: bool = False) -> PostResult:
    return PostResult(
        event=result["event"],
        outcome=result["outcome"],
        by=result.get("by"),
        value=result.get("value"),
        retained=result.get("retained"),
        trace=[TraceEntry(observer=hop["observer"], reply=hop["reply"]) for hop in result["trace"]],
        repeat=repeat,
    )


class Session:
    """Protocol state of one connection: pending requests and registrations."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._next_id = 1
        self._pending: Dict[int, _Pending] = {}
        self._observers: Dict[str, _ObserverRecord] = {}
        self._handlers: Dict[str, _HandlerRecord] = {}
        self._handler_ids: Dict[Tuple[str, Optional[str]], str] = {}
        # (channel, method) keys with a `handle` of ours in flight: an eviction of our
        # own handler for such a key is our replacement, not news for its owner.
        self._handles_in_flight: Dict[Tuple[str, Optional[str]], int] = {}
        self._close_reason: Optional[BrokerError] = None
        self._lost: Optional[str] = None
        self.max_frame = DEFAULT_MAX_FRAME
        self.client_id: Optional[str] = None
        self.server: Optional[str] = None
        #: Called with each :class:`SeenFrame` after ``monitor``.
        self.monitor_callback: Optional[Callable[[SeenFrame], Any]] = None
        #: Counts the connections this session has carried; answers and requests of an
        #: older one must never go out on a newer one.
        self.generation = 0

    # -- connection state -------------------------------------------------------------

    @property
    def lost(self) -> bool:
        """The connection is gone; every request fails."""
        return self._lost is not None

    @property
    def close_reason(self) -> Optional[BrokerError]:
        """The error frame that announced the broker was closing the connection, if any."""
        with self._lock:
            return self._close_reason

    def lost_error(self) -> ConnectionLost:
        """A fresh exception describing why the connection is gone."""
        with self._lock:
            message = self._lost or "not connected"
            reason = self._close_reason
        if reason is not None:
            message = f"{message} (broker said {reason.code}: {reason.message})"
        return ConnectionLost(message, reason)

    def connection_lost(self, message: str) -> None:
        """Mark the connection gone and fail every pending request. Idempotent."""
        with self._lock:
            if self._lost is None:
                self._lost = message
            pending = list(self._pending.values())
            self._pending.clear()
            for entry in pending:
                if entry.request.on_finish is not None:
                    entry.request.on_finish()
        for entry in pending:
            if not entry.waiter.done():
                entry.waiter.set_exception(self.lost_error())

    def live_registrations(self) -> Tuple[List[str], List[str]]:
        """The ids of the observers and handlers this connection still holds."""
        with self._lock:
            return list(self._observers), list(self._handlers)

    def pending_ops(self) -> List[str]:
        """The ops of the requests waiting for a reply."""
        with self._lock:
            return [entry.request.op for entry in self._pending.values()]

    def pending_keyed(self) -> bool:
        """Whether a request with an idempotency key is waiting for its reply."""
        with self._lock:
            return any(entry.request.keyed for entry in self._pending.values())

    def begin_connection(self) -> int:
        """Start carrying a new connection: registrations are forgotten (the client
        makes them again), the lost state is cleared. Returns the new generation."""
        with self._lock:
            pending = list(self._pending.values())
            self._pending.clear()
            self._observers.clear()
            self._handlers.clear()
            self._handler_ids.clear()
            self._handles_in_flight.clear()
            self._lost = None
            self._close_reason = None
            self.generation += 1
            generation = self.generation
        for entry in pending:
            if not entry.waiter.done():
                entry.waiter.set_exception(ConnectionLost("the connection was replaced"))
        return generation

    # -- requests ---------------------------------------------------------------------

    def start(self, request: Request[Any], waiter: Waiter) -> Tuple[int, bytes]:
        """Register ``request`` under a fresh id; return the id and the encoded frame.

        Raises ``ConnectionLost`` when the connection is gone, ``TypeError`` or
        ``ValueError`` when the request cannot be encoded or exceeds the broker's
        ``maxFrame``. Nothing stays registered when it raises.
        """
        with self._lock:
            if self._lost is not None:
                raise self.lost_error()
            request_id = self._next_id
            self._next_id += 1
            message = {"op": request.op, "id": request_id}
            message.update(request.fields)
            data = encode_frame(message)
            if not self._fits(data):
                raise ValueError(
                    f"{request.op} frame of {len(data) - 4} bytes exceeds the broker's maxFrame {self.max_frame}"
                )
            self._pending[request_id] = _Pending(request, waiter)
            if request.on_start is not None:
                request.on_start()
        return request_id, data

    def cancel(self, request_id: int) -> None:
        """Forget a request that timed out or was abandoned; its late reply is dropped."""
        with self._lock:
            entry = self._pending.pop(request_id, None)
            if entry is not None and entry.request.on_finish is not None:
                entry.request.on_finish()

    # -- incoming frames --------------------------------------------------------------

    def receive(self, frame: Dict[str, Any]) -> Optional[Work]:
        """Take in one frame from the broker; return the work it calls for, if any."""
        op = frame.get("op")
        if op == "reply":
            self._on_reply(frame)
            return None
        if op == "event":
            return self._on_event(frame)
        if op == "call":
            return self._on_call(frame)
        if op == "evicted":
            return self._on_evicted(frame)
        if op == "seen":
            self._on_seen(frame)
            return None
        logger.debug("notifbus: ignoring frame with op %r", op)
        return None

    def _on_reply(self, frame: Dict[str, Any]) -> None:
        request_id = frame.get("id")
        if isinstance(frame.get("error"), dict) and frame["error"].get("code") in CLOSING_CODES:
            # The broker closes after this error, whether or not it names a request.
            with self._lock:
                self._close_reason = error_from_wire(frame["error"])
        if request_id is None:
            error = error_from_wire(frame.get("error"))
            if error.code in CLOSING_CODES:
                # Raised to the caller (connect, or every pending call): not logged too.
                logger.debug("notifbus: broker is closing the connection: %s", error)
                return
            logger.warning("notifbus: broker sent an error frame: %s", error)
            return
        with self._lock:
            entry = self._pending.pop(request_id, None) if _is_int(request_id) else None
            if entry is None:
                logger.debug("notifbus: dropping reply to unknown or abandoned request %r", request_id)
                return
            request = entry.request
            outcome: Union[BaseException, Tuple[Any]]
            repeat = frame.get("repeat") is True
            if "error" in frame:
                error = error_from_wire(frame["error"], request.error_type)
                error.repeat = repeat
                outcome = error
            elif "result" in frame:
                make = request.on_repeat if repeat and request.on_repeat is not None else request.on_result
                try:
                    outcome = (make(frame["result"]),)
                except (KeyError, TypeError, ValueError, AttributeError) as exc:
                    outcome = ProtocolViolation(f"malformed {request.op} result {frame['result']!r}: {exc!r}")
            else:
                outcome = ProtocolViolation(f"reply to {request.op} has neither result nor error")
            if request.on_finish is not None:
                request.on_finish()
        if entry.waiter.done():
            return
        if isinstance(outcome, BaseException):
            entry.waiter.set_exception(outcome)
        else:
            entry.waiter.set_result(outcome[0])

    def _on_seen(self, frame: Dict[str, Any]) -> None:
        # Called in order on the reading thread or task: a monitor must see frames as
        # the broker did, so they are not handed to workers that could reorder them.
        callback = self.monitor_callback
        if callback is None:
            return
        try:
            callback(SeenFrame(str(frame.get("dir", "")), str(frame.get("client", "")), frame.get("frame")))
        except Exception:
            logger.exception("notifbus: monitor callback failed")

    def _on_event(self, frame: Dict[str, Any]) -> Optional[Work]:
        fields = _id_and_names(frame, "event", "observer", "name")
        if fields is None:
            return None
        event_id, observer, name = fields
        with self._lock:
            record = self._observers.get(observer)
        if record is None:
            logger.debug("notifbus: event %d for unknown observer %s; passing it on", event_id, observer)
            return SendFrame(self.answer(event_id, None))
        event = Event(name=name, payload=frame.get("payload"), event=event_id, observer=observer)
        return DeliverEvent(event, record.handler)

    def _on_call(self, frame: Dict[str, Any]) -> Optional[Work]:
        fields = _id_and_names(frame, "call", "channel", "method")
        if fields is None:
            return None
        call_id, channel, method = fields
        handler_id = frame.get("handler")
        with self._lock:
            record = self._handlers.get(handler_id) if isinstance(handler_id, str) else None
        if record is None:
            error = MissingPluginError(f"no handler {handler_id} for {channel}.{method} on this connection")
            return SendFrame(self.method_failure(call_id, error))
        return DeliverCall(call_id, channel, method, frame.get("arguments"), record.handler)

    def _on_evicted(self, frame: Dict[str, Any]) -> Optional[Work]:
        by = frame.get("by")
        by = by if isinstance(by, str) else ""
        with self._lock:
            observer = frame.get("observer")
            if isinstance(observer, str):
                record = self._observers.pop(observer, None)
                if record is None:
                    return None
                eviction = Eviction("observer", observer, by)
                callback = record.on_evicted
            else:
                handler = frame.get("handler")
                if not isinstance(handler, str):
                    logger.warning("notifbus: ignoring malformed evicted frame %r", frame)
                    return None
                handler_record = self._handlers.pop(handler, None)
                if handler_record is None:
                    return None
                key = handler_record.key
                if self._handler_ids.get(key) == handler:
                    del self._handler_ids[key]
                if self._handles_in_flight.get(key):
                    return None
                eviction = Eviction("handler", handler, by)
                callback = handler_record.on_evicted
        if callback is None:
            logger.info("notifbus: %s %s was evicted by %s", eviction.kind, eviction.id, eviction.by)
            return None
        return NotifyEviction(eviction, callback)

    # -- answers to events and calls --------------------------------------------------

    def _fits(self, data: bytes) -> bool:
        return len(data) - 4 <= self.max_frame

    def answer(self, event_id: int, verdict: Any) -> bytes:
        """The frame answering event ``event_id`` with an observer handler's return value."""
        if verdict is None or isinstance(verdict, _Next):
            return encode_frame({"op": "next", "event": event_id})
        if isinstance(verdict, _Stop):
            return encode_frame({"op": "stop", "event": event_id})
        if isinstance(verdict, Complete):
            try:
                data = encode_frame({"op": "complete", "event": event_id, "value": verdict.value})
            except (TypeError, ValueError) as exc:
                logger.error("notifbus: event %d: complete value cannot be sent (%s); answering next", event_id, exc)
            else:
                if self._fits(data):
                    return data
                logger.error("notifbus: event %d: complete value exceeds maxFrame; answering next", event_id)
        else:
            logger.error(
                "notifbus: event %d: observer handler returned %r, not NEXT, STOP or Complete; answering next",
                event_id,
                verdict,
            )
        return encode_frame({"op": "next", "event": event_id})

    def answer_failure(self, event_id: int, exc: BaseException) -> bytes:
        """The frame answering event ``event_id`` after its handler raised: ``next``."""
        logger.error("notifbus: observer handler failed on event %d; answering next", event_id, exc_info=exc)
        return encode_frame({"op": "next", "event": event_id})

    def method_return(self, call_id: int, value: Any) -> bytes:
        """The ``return`` frame carrying a method call handler's result."""
        try:
            data = encode_frame({"op": "return", "call": call_id, "result": value})
        except (TypeError, ValueError) as exc:
            return self._error_return(call_id, f"result cannot be sent as JSON: {exc}")
        if not self._fits(data):
            return self._error_return(call_id, f"result of {len(data) - 4} bytes exceeds maxFrame {self.max_frame}")
        return data

    def method_failure(self, call_id: int, exc: BaseException) -> bytes:
        """The ``return`` frame for a method call handler that raised ``exc``.

        ``MethodCallError`` goes out as its code, message and details;
        ``NotImplementedError`` as ``not_implemented``; anything else as code
        ``"error"`` with ``str(exc)`` (or the exception's type name) as message.
        """
        if isinstance(exc, MethodCallError):
            error = exc.to_wire()
        elif isinstance(exc, NotImplementedError):
            error = {"code": "not_implemented", "message": str(exc) or "method not implemented"}
        else:
            logger.warning("notifbus: method call handler failed on call %d", call_id, exc_info=exc)
            error = {"code": HANDLER_EXCEPTION_CODE, "message": str(exc) or type(exc).__name__}
        try:
            data = encode_frame({"op": "return", "call": call_id, "error": error})
        except (TypeError, ValueError) as encode_exc:
            return self._error_return(call_id, f"error details cannot be sent as JSON: {encode_exc}")
        if not self._fits(data):
            return self._error_return(call_id, "error details exceed maxFrame")
        return data

    def _error_return(self, call_id: int, message: str) -> bytes:
        logger.error("notifbus: call %d: %s", call_id, message)
        error = {"code": HANDLER_EXCEPTION_CODE, "message": message}
        return encode_frame({"op": "return", "call": call_id, "error": error})

    # -- request builders -------------------------------------------------------------

    def hello(self, name: Optional[str]) -> Request[Dict[str, Any]]:
        """``hello``: greets the broker and records its ``client`` id and ``maxFrame``."""
        fields: Dict[str, Any] = {"protocol": PROTOCOL_VERSION}
        if name is not None:
            fields["name"] = name

        def on_result(result: Any) -> Dict[str, Any]:
            self.client_id = result["client"]
            self.server = result["server"]
            max_frame = result["maxFrame"]
            if _is_int(max_frame) and max_frame > 0:
                self.max_frame = max_frame
            return dict(result)

        return Request("hello", fields, on_result)

    def ping(self) -> Request[None]:
        """``ping``."""
        return Request("ping", {}, lambda result: None)

    def subscribe(
        self,
        events: Union[str, Iterable[str]],
        handler: Callable[..., Any],
        priority: int,
        key: Optional[str],
        on_evicted: Optional[Callable[[Eviction], Any]],
        resume: bool = False,
    ) -> Request[str]:
        """``subscribe``: returns the observer id and registers ``handler`` under it.

        ``resume`` marks a subscription made again after reconnecting (PROTOCOL.md §13).
        """
        if not callable(handler):
            raise TypeError(f"observer handler must be callable, not {type(handler).__name__}")
        names = [events] if isinstance(events, str) else list(events)
        fields: Dict[str, Any] = {"events": names, "priority": priority}
        if key is not None:
            fields["key"] = key
        if resume:
            fields["resume"] = True
        record = _ObserverRecord(handler, on_evicted)

        def on_result(result: Any) -> str:
            observer = result["observer"]
            if not isinstance(observer, str):
                raise TypeError("observer id is not a string")
            self._observers[observer] = record
            return observer

        return Request("subscribe", fields, on_result)

    def unsubscribe(self, observer: Optional[str] = None, key: Optional[str] = None) -> Request[List[str]]:
        """``unsubscribe`` by observer id or by key: returns the removed ids."""
        fields = {"observer": observer} if key is None else {"key": key}

        def on_result(result: Any) -> List[str]:
            removed = list(result["removed"])
            for observer_id in removed:
                self._observers.pop(observer_id, None)
            return removed

        return Request("unsubscribe", fields, on_result)

    def post(self, name: str, payload: Any, once: Optional[str] = None) -> Request[PostResult]:
        """``post``: returns a ``PostResult``."""
        fields = _keyed({"name": name}, once)
        fields["payload"] = payload
        return Request("post", fields, _post_result, on_repeat=lambda result: _post_result(result, True))

    def handle(
        self,
        channel: str,
        method: Optional[str],
        handler: Callable[..., Any],
        on_evicted: Optional[Callable[[Eviction], Any]],
        resume: bool = False,
    ) -> Request[str]:
        """``handle``: returns the handler id and registers ``handler`` under it."""
        if not callable(handler):
            raise TypeError(f"method call handler must be callable, not {type(handler).__name__}")
        fields: Dict[str, Any] = {"channel": channel}
        if method is not None:
            fields["method"] = method
        if resume:
            fields["resume"] = True
        record = _HandlerRecord(channel, method, handler, on_evicted)
        key = record.key

        def on_start() -> None:
            self._handles_in_flight[key] = self._handles_in_flight.get(key, 0) + 1

        def on_finish() -> None:
            remaining = self._handles_in_flight.get(key, 0) - 1
            if remaining > 0:
                self._handles_in_flight[key] = remaining
            else:
                self._handles_in_flight.pop(key, None)

        def on_result(result: Any) -> str:
            handler_id = result["handler"]
            if not isinstance(handler_id, str):
                raise TypeError("handler id is not a string")
            self._handlers[handler_id] = record
            self._handler_ids[key] = handler_id
            return handler_id

        return Request("handle", fields, on_result, on_start=on_start, on_finish=on_finish)

    def current_handler(self, channel: str, method: Optional[str]) -> Optional[str]:
        """The id of this connection's handler for exactly ``(channel, method)``, if any."""
        with self._lock:
            return self._handler_ids.get((channel, method))

    def forget_handler(self, handler_id: str) -> None:
        """Drop the local record of a handler the broker no longer has."""
        with self._lock:
            record = self._handlers.pop(handler_id, None)
            if record is not None and self._handler_ids.get(record.key) == handler_id:
                del self._handler_ids[record.key]

    def unhandle(self, handler_id: str) -> Request[List[str]]:
        """``unhandle``: returns the removed ids."""

        def on_result(result: Any) -> List[str]:
            removed = list(result["removed"])
            for removed_id in removed:
                self.forget_handler(removed_id)
            return removed

        return Request("unhandle", {"handler": handler_id}, on_result)

    def invoke(self, channel: str, method: str, arguments: Any) -> Request[Any]:
        """``invoke``: returns the handler's result; errors become ``MethodCallError``."""
        fields = {"channel": channel, "method": method, "arguments": arguments}
        return Request("invoke", fields, error_type=MethodCallError)

    def put(self, slot: str, value: Any, once: Optional[str] = None) -> Request[PutResult]:
        """``put``: returns a ``PutResult``."""

        def on_result(result: Any, repeat: bool = False) -> PutResult:
            return PutResult(replaced=bool(result["replaced"]), delivered=bool(result["delivered"]), repeat=repeat)

        fields = _keyed({"slot": slot}, once)
        fields["value"] = value
        return Request("put", fields, on_result, on_repeat=lambda result: on_result(result, True))

    def take(self, slot: str, wait: Optional[float], once: Optional[str] = None) -> Request[Any]:
        """``take``, waiting up to ``wait`` seconds (sent as whole milliseconds, rounded up)."""
        fields: Dict[str, Any] = _keyed({"slot": slot}, once)
        extra_wait = 0.0
        if wait is not None:
            if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not math.isfinite(wait):
                raise ValueError(f"take wait must be a finite number of seconds, not {wait!r}")
            if not 0 <= wait <= MAX_TAKE_WAIT:
                raise ValueError(f"take wait must be 0 to {MAX_TAKE_WAIT:g} seconds, not {wait!r}")
            fields["wait"] = math.ceil(wait * 1000)
            extra_wait = max(0.0, float(wait))
        return Request("take", fields, extra_wait=extra_wait)

    def peek(self, slot: str) -> Request[Any]:
        """``peek``."""
        return Request("peek", {"slot": slot})

    def set_categories(self, categories: Iterable[Dict[str, Any]], once: Optional[str] = None) -> Request[int]:
        """``setCategories``: returns the number of categories now in force."""
        fields = _keyed({"categories": list(categories)}, once)
        return Request("setCategories", fields, lambda result: int(result["count"]))

    def get_categories(self) -> Request[List[Dict[str, Any]]]:
        """``getCategories``: returns the category list."""
        return Request("getCategories", {}, lambda result: list(result["categories"]))

    def monitor(self) -> Request[None]:
        """``monitor``: from its reply on, ``seen`` frames go to :attr:`monitor_callback`."""
        return Request("monitor", {}, lambda result: None)

    def status(self, page: Optional[str] = None) -> Request[Dict[str, Any]]:
        """``status``: returns one page of the broker's status object (the first, or the
        one an earlier page's ``next`` names)."""
        return Request("status", {} if page is None else {"page": page}, lambda result: dict(result))
