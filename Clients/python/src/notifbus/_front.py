"""What the blocking and the asyncio client share, written once: the connection's
properties, the steps of each call beyond sending one request, what a handler's work
item answers, and handing read frames to the session.

It does no I/O and never waits: each front carries the requests and runs the user's code
its own way (threads, or tasks on one loop). A call written here is a generator of
steps: it yields an :class:`Ask` (a request, and the timeout for its reply) or a
:class:`Run` (user code to call), is sent the reply's result or the code's return
value, or has their exception thrown in, and returns the call's result. A front's
``_drive`` plays it, the blocking one by waiting, the asyncio one by awaiting.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any, Callable, Dict, Generator, Generic, Iterable, List, Optional, TypeVar, Union

from ._errors import BrokerError, ProtocolViolation
from ._framing import FrameDecoder
from ._reconnect import Registry, registered
from ._session import DeliverCall, DeliverEvent, Request, SendFrame, Session, StatusPages, Work, status_time_left
from ._types import Eviction, SeenFrame

logger = logging.getLogger("notifbus")

_T = TypeVar("_T")

#: Default bound, in seconds, on every wait of a client: connecting and each reply.
DEFAULT_TIMEOUT = 60.0

#: Bytes asked of the socket or stream per read.
READ_SIZE = 65536


@dataclass(frozen=True)
class Ask(Generic[_T]):
    """Step: send ``request`` and wait for its reply, at most ``timeout`` seconds
    (``None``: the client's default)."""

    request: Request[_T]
    timeout: Optional[float]


@dataclass(frozen=True)
class Run:
    """Step: call ``code()``, user code (a handler or a callback); the asyncio client
    awaits what it returns when that is awaitable."""

    code: Callable[[], Any]


#: A call written as steps, returning a ``_T``.
Steps = Generator[Union[Ask[Any], Run], Any, _T]


class Play(Generic[_T]):
    """One call's steps being played: :meth:`next` gives each step in turn, after
    :meth:`answer` or :meth:`fail` told the outcome of the one before, and ``None`` once
    the call has returned, its value then in :attr:`result`. An exception the call does
    not catch comes out of :meth:`next`."""

    def __init__(self, steps: Steps[_T]) -> None:
        self._steps = steps
        self._value: Any = None
        self._failure: Optional[Exception] = None
        #: The call's return value, once :meth:`next` returned None.
        self.result: Optional[_T] = None

    def next(self) -> Union[Ask[Any], Run, None]:
        """The call's next step, given the outcome of the last; None once it returned."""
        value, failure = self._value, self._failure
        self._value, self._failure = None, None
        try:
            return self._steps.send(value) if failure is None else self._steps.throw(failure)
        except StopIteration as done:
            self.result = done.value
            return None

    def answer(self, value: Any) -> None:
        """The step's reply arrived, or its code returned: ``value`` goes into the call."""
        self._value = value

    def fail(self, failure: Exception) -> None:
        """The step failed: ``failure`` is raised inside the call."""
        self._failure = failure


def hand_over(session: Session, decoder: FrameDecoder, dispatch: Callable[[Work], None]) -> None:
    """Give every complete frame the decoder holds to the session, in order, and each
    work item that comes of one to ``dispatch``."""
    while True:
        frame = decoder.next_frame()
        if frame is None:
            return
        work = session.receive(frame)
        if work is not None:
            dispatch(work)


def read_failure(exc: Exception, reader: str) -> str:
    """Why a connection ended when its reader (``"thread"``, ``"task"``) stopped on
    ``exc``; an unexpected exception is a bug, logged with its traceback."""
    if isinstance(exc, ProtocolViolation):
        return f"broker broke the protocol: {exc}"
    if isinstance(exc, OSError):
        return f"connection error: {exc}"
    logger.exception("notifbus: reader %s failed", reader)
    return f"reader failed: {exc!r}"


def work_steps(session: Session, work: Work) -> Steps[Optional[bytes]]:
    """Run a work item's user code; return the frame that answers it, if any.

    An observer or method call handler that raises is answered for (``next``, or an
    error ``return``); an eviction callback that raises is logged.
    """
    if isinstance(work, SendFrame):
        return work.data
    if isinstance(work, DeliverEvent):
        event, observer = work.event, work.handler
        try:
            verdict = yield Run(lambda: observer(event))
        except Exception as exc:
            return session.answer_failure(event.event, exc)
        return session.answer(event.event, verdict)
    if isinstance(work, DeliverCall):
        call, handler = work, work.handler
        try:
            result = yield Run(lambda: handler(call.method, call.arguments))
        except Exception as exc:
            return session.method_failure(call.call, exc)
        return session.method_return(call.call, result)
    eviction, callback = work.eviction, work.callback
    try:
        yield Run(lambda: callback(eviction))
    except Exception:
        logger.exception("notifbus: on_evicted callback failed for %s", eviction.id)
    return None


class ClientFront:
    """The part of :class:`notifbus.Client` and :class:`notifbus.aio.Client` that does
    not depend on how they wait. Mixed in; uses their ``_session``, ``_registry`` and
    ``timeout``."""

    _session: Session
    _registry: Registry
    timeout: float

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

    def current_id(self, handle: str) -> str:
        """The broker's present id of an observer or handler this client registered,
        given the id it first returned (they differ after a reconnect)."""
        return self._registry.current(handle)

    def _limit(self, request: Request[Any], timeout: Optional[float]) -> float:
        """How long a request waits for its reply, in seconds."""
        return (self.timeout if timeout is None else timeout) + request.extra_wait

    def _monitor_steps(self, callback: Callable[[SeenFrame], Any], timeout: Optional[float]) -> Steps[None]:
        self._session.monitor_callback = callback
        yield Ask(self._session.monitor(), timeout)
        # A reconnect starts the monitor again on the new connection.
        self._registry.monitoring = True

    def _subscribe_steps(
        self,
        events: Union[str, Iterable[str]],
        handler: Callable[..., Any],
        priority: int,
        key: Optional[str],
        on_evicted: Optional[Callable[[Eviction], Any]],
        timeout: Optional[float],
    ) -> Steps[str]:
        names = [events] if isinstance(events, str) else list(events)
        request = registered(self._session.subscribe(names, handler, priority, key, on_evicted), self._registry,
                             "observer", handler, on_evicted, events=names, priority=priority, key=key)
        return (yield Ask(request, timeout))

    def _unsubscribe_steps(self, *, observer: Optional[str] = None, key: Optional[str] = None,
                           timeout: Optional[float]) -> Steps[List[str]]:
        """Remove by observer id (a handle this client got first, or any broker id) or
        by key; return the removed ids, as handles where they are this client's."""
        if observer is not None:
            observer = self._registry.current(observer)
        removed = yield Ask(self._session.unsubscribe(observer=observer, key=key), timeout)
        handles = self._registry.handles(removed)
        self._registry.forget(removed)
        return handles

    def _status_steps(self, timeout: Optional[float]) -> Steps[Dict[str, Any]]:
        """Every page of ``status``, merged, within one bound for the whole walk."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        pages = StatusPages((yield Ask(self._session.status(), limit)))
        while pages.next is not None:
            pages.add((yield Ask(self._session.status(pages.next), status_time_left(deadline, limit))))
        return pages.whole()


class MethodChannelFront:
    """The part of both clients' ``MethodChannel`` that does not depend on how they wait."""

    def __init__(self, client: ClientFront, name: str) -> None:
        self._client = client
        #: The channel name.
        self.name = name

    def _invoke_steps(self, method: str, arguments: Any, timeout: Optional[float]) -> Steps[Any]:
        return (yield Ask(self._client._session.invoke(self.name, method, arguments), timeout))

    def _handler_steps(
        self,
        handler: Optional[Callable[..., Any]],
        method: Optional[str],
        on_evicted: Optional[Callable[[Eviction], Any]],
        timeout: Optional[float],
    ) -> Steps[Optional[str]]:
        """Register ``handler`` and return its id, or with ``None`` remove this
        connection's handler of the route, if it has one (gone already counts as removed)."""
        session = self._client._session
        registry = self._client._registry
        if handler is not None:
            request = registered(session.handle(self.name, method, handler, on_evicted), registry,
                                 "handler", handler, on_evicted, channel=self.name, method=method)
            return (yield Ask(request, timeout))
        current = session.current_handler(self.name, method)
        if current is not None:
            try:
                yield Ask(session.unhandle(current), timeout)
            except BrokerError as exc:
                if exc.code != "not_found":
                    raise
                session.forget_handler(current)
            registry.forget([current])
        return None
