"""What the blocking and the asyncio client share, written once: every public call
(its parameters, doc, argument handling, requests and how the replies are read),
``connect``'s parameters, the connection's properties, what a handler's work item
answers, and handing read frames to the session.

It does no I/O and never waits: each front carries the requests and runs the user's code
its own way (threads, or tasks on one loop). A call written here is a generator of
steps: it yields an :class:`Ask` (a request, and the timeout for its reply) or a
:class:`Run` (user code to call), is sent the reply's result or the code's return
value, or has their exception thrown in, and returns the call's result. A front's
``_drive`` plays it, the blocking one by waiting, the asyncio one by awaiting. A
:class:`Call` turns the steps into a method of each client: a blocking one on
:class:`Threads` classes, a coroutine on :class:`Tasks` classes, nothing else differing.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
import types
from dataclasses import dataclass
from typing import (
    TYPE_CHECKING,
    Any,
    Awaitable,
    Callable,
    Coroutine,
    Dict,
    Generator,
    Generic,
    Iterable,
    List,
    Optional,
    Tuple,
    TypeVar,
    Union,
    overload,
)

from ._errors import BrokerError, ConnectionLost, ProtocolViolation, RequestTimeout
from ._framing import FrameDecoder
from ._paths import resolve_socket_path
from ._reconnect import ConnectionState, Registry, registered
from ._session import (
    DeliverCall,
    DeliverEvent,
    Request,
    SendFrame,
    Session,
    StatusPages,
    Waiter,
    Work,
    status_time_left,
)
from ._types import Event, Eviction, PostResult, PutResult, SeenFrame, Verdict

if TYPE_CHECKING:
    from typing import Concatenate, ParamSpec

    _P = ParamSpec("_P")

logger = logging.getLogger("notifbus")

_T = TypeVar("_T")
_C = TypeVar("_C")

#: What an observer's handler is: it gets the :class:`Event` and answers with a
#: :data:`Verdict` (the asyncio client awaits one it returns awaitable).
ObserverHandler = Callable[[Event], Union[Verdict, Awaitable[Verdict]]]
#: What a method call handler is: it gets the method name and the arguments.
MethodCallHandler = Callable[[str, Any], Any]
#: What an ``on_evicted`` callback is.
EvictionCallback = Callable[[Eviction], Any]

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


def blocking(steps: Callable[..., Steps[Any]], note: str) -> Callable[..., Any]:
    """The blocking method that plays ``steps`` with its client's ``_drive``: with the
    parameters of ``steps`` and its doc followed by ``note`` (what is particular to
    threads)."""

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._drive(steps(self, *args, **kwargs))

    return _like(call, steps, note)


def coroutine(steps: Callable[..., Steps[Any]], note: str) -> Callable[..., Any]:
    """The coroutine method that plays ``steps`` with its client's ``_drive``, awaiting
    it; made as :func:`blocking` makes it, ``note`` telling what is particular to asyncio."""

    async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return await self._drive(steps(self, *args, **kwargs))

    return _like(call, steps, note)


def _like(call: Any, steps: Callable[..., Any], note: str) -> Any:
    returns = inspect.signature(steps).return_annotation
    # The steps return ``Steps[X]``; the call returns the ``X``.
    if isinstance(returns, str) and returns.startswith("Steps[") and returns.endswith("]"):
        returns = returns[len("Steps[") : -1]
    return _dressed(call, steps, note, returns)


def _dressed(made: Any, template: Callable[..., Any], note: str, returns: Any) -> Any:
    """``made``, given the parameters and doc of ``template``, ``note`` after the doc,
    and ``returns`` as its result's annotation."""
    made.__doc__ = inspect.cleandoc(template.__doc__ or "") + (f"\n\n{note}" if note else "")
    made.__signature__ = inspect.signature(template).replace(return_annotation=returns)
    made.__annotations__ = {**template.__annotations__, "return": returns}
    return made


@dataclass(frozen=True)
class Connecting:
    """What a ``connect`` asked for, its socket path resolved. The front opens the
    connection and greets; :meth:`ready` then settles the client."""

    path: str
    name: Optional[str]
    timeout: float
    reconnect: Optional[bool]
    on_connection_state: Optional[Callable[[ConnectionState], Any]]
    resend_keyed: bool = True

    def ready(self, client: _C) -> _C:
        """``client``, greeted, with its name for a later hello and its reconnection set."""
        client._name = self.name  # type: ignore[attr-defined]
        client._reconnect = self.reconnect  # type: ignore[attr-defined]
        client._resend_keyed = self.resend_keyed  # type: ignore[attr-defined]
        client.on_connection_state = self.on_connection_state  # type: ignore[attr-defined]
        return client


def connecting(
    socket: Optional[Union[str, "os.PathLike[str]"]] = None,
    name: Optional[str] = None,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    reconnect: Optional[bool] = None,
    on_connection_state: Optional[Callable[[ConnectionState], Any]] = None,
    resend_keyed: bool = True,
) -> Connecting:
    """Connect to the broker, say ``hello`` and return a ready :class:`Client`.

    ``socket`` defaults to ``NOTIFBUS_SOCKET``, then ``$XDG_RUNTIME_DIR/notifbus.sock``,
    then ``/tmp/notifbus-$UID/notifbus.sock``. ``name`` is shown in the broker's
    status. ``timeout`` (seconds) bounds the connect and becomes the client's default
    timeout for every call.

    Raises ``OSError`` (``FileNotFoundError``, ``ConnectionRefusedError``, ...) naming
    the path when the socket cannot be reached, ``BrokerError`` when the broker refuses the
    connection (``forbidden``, ``too_many_clients``, ``unsupported_protocol``) and
    ``RequestTimeout`` when it does not answer in time.

    When the connection is lost (a broker restart), a client that holds observers or
    handlers, or was waiting in a ``take``, connects again by itself and makes its
    observers and handlers again (``reconnect=None``, the default); ``True`` always
    reconnects, ``False`` never. ``on_connection_state`` gets a
    :class:`ConnectionState` on each loss and each return (PROTOCOL.md §13).

    Calls in flight at the loss raise ``ConnectionLost``, except those with an
    idempotency key (``once``): with ``resend_keyed`` (the default) they are sent again on
    the new connection, within their timeout, and the broker answers each exactly once;
    a client with such a call in flight reconnects for it.
    """
    return Connecting(resolve_socket_path(socket), name, timeout, reconnect, on_connection_state, resend_keyed)


def blocking_connect(
    template: "Callable[_P, Connecting]", open_client: Callable[[Connecting], _C], note: str = ""
) -> "Callable[_P, _C]":
    """The blocking ``connect`` of a front: the parameters and doc of ``template``
    (:func:`connecting`), the connection opened and greeted by ``open_client``."""

    def connect(*args: Any, **kwargs: Any) -> Any:
        settings = template(*args, **kwargs)
        return settings.ready(open_client(settings))

    return _connect_like(connect, template, open_client, note)


def coroutine_connect(
    template: "Callable[_P, Connecting]", open_client: Callable[[Connecting], Awaitable[_C]], note: str = ""
) -> "Callable[_P, Coroutine[Any, Any, _C]]":
    """The asyncio ``connect`` of a front, made as :func:`blocking_connect` makes one,
    awaiting ``open_client``."""

    async def connect(*args: Any, **kwargs: Any) -> Any:
        settings = template(*args, **kwargs)
        return settings.ready(await open_client(settings))

    return _connect_like(connect, template, open_client, note)


def _connect_like(connect: Any, template: Callable[..., Any], open_client: Callable[..., Any], note: str) -> Any:
    connect.__module__ = open_client.__module__
    connect.__qualname__ = "connect"
    return _dressed(connect, template, note, "Client")


class Threads:
    """Mixed into the blocking client's classes: their calls block (:func:`blocking`)."""

    _plays = staticmethod(blocking)


class Tasks:
    """Mixed into the asyncio client's classes: their calls are coroutines (:func:`coroutine`)."""

    _plays = staticmethod(coroutine)


if TYPE_CHECKING:

    class Call(Generic[_P, _T]):
        """As the class below, typed for checkers: a call's parameters and result."""

        def __init__(
            self, steps: Callable[Concatenate[Any, _P], Steps[_T]], *, threads: str = "", tasks: str = ""
        ) -> None: ...

        steps: Callable[Concatenate[Any, _P], Steps[_T]]

        @overload
        def __get__(self, instance: None, owner: type) -> Any: ...

        @overload
        def __get__(self, instance: Threads, owner: type) -> Callable[_P, _T]: ...

        @overload
        def __get__(self, instance: Tasks, owner: type) -> Callable[_P, Coroutine[Any, Any, _T]]: ...

        def __get__(self, instance: Any, owner: type) -> Any: ...

else:

    class Call:
        """One call of both clients, written once as steps. As an attribute of a client
        or channel class it is the method that plays the steps that class's way: blocking
        where the class is :class:`Threads`, a coroutine where it is :class:`Tasks`; with
        the parameters and doc of the steps, and after the doc the note given for that
        way (``threads=``, ``tasks=``)."""

        def __init__(self, steps, *, threads="", tasks=""):
            #: The call's steps, to be played within another call's.
            self.steps = steps
            self._notes = {blocking: threads, coroutine: tasks}
            self._name = steps.__name__
            self._made = {}

        def __set_name__(self, owner, name):
            self._name = name

        def __get__(self, instance, owner):
            plays = getattr(owner, "_plays", None)
            if plays is None:
                return self  # on a class that writes calls, not on a client's
            made = self._made.get(plays)
            if made is None:
                made = plays(self.steps, self._notes[plays])
                # Named as a method written in the body of the front's class.
                front = next(cls for cls in owner.__mro__ if Threads in cls.__bases__ or Tasks in cls.__bases__)
                made.__name__ = self._name
                made.__module__ = front.__module__
                made.__qualname__ = f"{front.__qualname__}.{self._name}"
                self._made[plays] = made
            return made if instance is None else types.MethodType(made, instance)


def call(
    *, threads: str = "", tasks: str = ""
) -> "Callable[[Callable[Concatenate[Any, _P], Steps[_T]]], Call[_P, _T]]":
    """Make the steps below a :class:`Call`, ``threads`` and ``tasks`` noting what is
    particular to the blocking and the asyncio client."""
    return lambda steps: Call(steps, threads=threads, tasks=tasks)


class ClientFront:
    """The part of :class:`notifbus.Client` and :class:`notifbus.aio.Client` that does
    not depend on how they wait: every call written once as steps, a :class:`Call` each,
    which each client plays its own way (:class:`Threads`, :class:`Tasks`). Mixed in; uses
    their ``_session``, ``_registry``, ``_closed``, ``_connection_ended`` and
    ``timeout``."""

    _session: Session
    _registry: Registry
    _closed: bool
    _resend_keyed: bool = False
    timeout: float
    # From each front's reconnect mixin.
    _connection_ended: Callable[[int, str], None]
    _may_wait_for_reconnect: Callable[[], bool]

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

    # -- the calls, as steps -----------------------------------------------------------

    @Call
    def ping(self, *, timeout: Optional[float] = None) -> Steps[None]:
        """Round-trip a ``ping`` to the broker."""
        return (yield Ask(self._session.ping(), timeout))

    @call(
        threads="``callback`` runs on the reader thread: keep it short.",
        tasks="``callback`` is a plain function, run on the loop.",
    )
    def monitor(self, callback: Callable[[SeenFrame], Any], *, timeout: Optional[float] = None) -> Steps[None]:
        """Mirror every frame the broker exchanges with other clients: ``callback`` gets
        each :class:`SeenFrame`, in order."""
        self._session.monitor_callback = callback
        yield Ask(self._session.monitor(), timeout)
        # A reconnect starts the monitor again on the new connection.
        self._registry.monitoring = True

    @call(
        threads="``handler`` runs on a thread of its own and may take its time; ``on_evicted`` runs on such a "
        "thread too.",
        tasks="``handler`` may be a coroutine function; a plain function runs on the loop and must not "
        "block. Each event runs in a task of its own. ``on_evicted`` may be a coroutine function too.",
    )
    def add_observer(
        self,
        events: Union[str, Iterable[str]],
        handler: ObserverHandler,
        priority: int = 100,
        key: Optional[str] = None,
        *,
        on_evicted: Optional[EvictionCallback] = None,
        timeout: Optional[float] = None,
    ) -> Steps[str]:
        """Subscribe ``handler`` to one event name or several; return the observer id.

        Lower ``priority`` runs first; ties run in subscription order. A ``key`` is
        unique across the broker: subscribing with a key that a live observer holds
        removes that observer, and its owner's ``on_evicted`` gets an
        :class:`Eviction`.

        ``handler(event)`` receives an :class:`Event` and returns :data:`NEXT`,
        :data:`STOP` or :class:`Complete` (``None`` counts as ``NEXT``). If it raises,
        the error is logged and the event is passed on with ``next``.
        """
        names = [events] if isinstance(events, str) else list(events)
        request = registered(
            self._session.subscribe(names, handler, priority, key, on_evicted),
            self._registry,
            "observer",
            handler,
            on_evicted,
            events=names,
            priority=priority,
            key=key,
        )
        return (yield Ask(request, timeout))

    @Call
    def remove_observer(self, observer_id: str, *, timeout: Optional[float] = None) -> Steps[List[str]]:
        """Remove an observer (of any connection) by id; return the removed ids.

        Raises ``BrokerError`` with code ``not_found`` when there is none.
        """
        return (yield from self._unsubscribe_steps(self._registry.current(observer_id), None, timeout))

    @Call
    def remove_observer_by_unique_key(self, key: str, *, timeout: Optional[float] = None) -> Steps[List[str]]:
        """Remove the observer holding ``key``; return the removed ids.

        Raises ``BrokerError`` with code ``not_found`` when there is none.
        """
        return (yield from self._unsubscribe_steps(None, key, timeout))

    def _unsubscribe_steps(
        self, observer: Optional[str], key: Optional[str], timeout: Optional[float]
    ) -> Steps[List[str]]:
        """Remove by broker id or by key; return the removed ids, as handles where they
        are this client's."""
        removed = yield Ask(self._session.unsubscribe(observer=observer, key=key), timeout)
        handles = self._registry.handles(removed)
        self._registry.forget(removed)
        return handles

    @Call
    def post(
        self, name: str, payload: Any = None, *, once: Optional[str] = None, timeout: Optional[float] = None
    ) -> Steps[PostResult]:
        """Post an event and wait until its chain has run; return the :class:`PostResult`.

        The broker runs one event at a time, so the wait includes the events queued
        before this one. Posting from an observer handler therefore waits for the
        handler's own event to finish first.

        With a ``once`` key (protocol §3.8) the event runs at most once for that key: the
        same post sent again with the key returns the first result, ``repeat`` set; with
        another payload it raises ``BrokerError`` ``once_conflict``. A post whose chain a
        broker crash cut raises ``interrupted``.
        """
        return (yield Ask(self._session.post(name, payload, once), timeout))

    @Call
    def put(
        self, slot: str, value: Any, *, once: Optional[str] = None, timeout: Optional[float] = None
    ) -> Steps[PutResult]:
        """Put ``value`` in ``slot`` (``None`` empties it); a waiting ``take`` gets it at once.

        With a ``once`` key, the same put sent again changes nothing and returns the first
        result, ``repeat`` set.
        """
        return (yield Ask(self._session.put(slot, value, once), timeout))

    @Call
    def take(
        self, slot: str, wait: Optional[float] = None, *, once: Optional[str] = None, timeout: Optional[float] = None
    ) -> Steps[Any]:
        """Take the value out of ``slot``, or ``None`` if it is empty.

        With ``wait`` (seconds, up to 600), an empty slot is waited on that long for a
        ``put``. The call's timeout is ``timeout`` plus ``wait``. With a ``once`` key, a
        take sent again returns the value the first took, and takes nothing.
        """
        return (yield Ask(self._session.take(slot, wait, once), timeout))

    @Call
    def peek(self, slot: str, *, timeout: Optional[float] = None) -> Steps[Any]:
        """The value in ``slot``, left in place, or ``None`` if it is empty."""
        return (yield Ask(self._session.peek(slot), timeout))

    @Call
    def set_notification_categories(
        self, categories: Iterable[Dict[str, Any]], *, once: Optional[str] = None, timeout: Optional[float] = None
    ) -> Steps[int]:
        """Replace the notification categories (dicts as in protocol §3.6); return their count.

        An invalid set raises ``BrokerError`` (``bad_request``) and leaves the set in
        force unchanged. With a ``once`` key, the same set sent again replaces nothing.
        """
        return (yield Ask(self._session.set_categories(categories, once), timeout))

    @Call
    def notification_categories(self, *, timeout: Optional[float] = None) -> Steps[List[Dict[str, Any]]]:
        """The notification categories in force, exactly as they were set."""
        return (yield Ask(self._session.get_categories(), timeout))

    @Call
    def status(self, *, timeout: Optional[float] = None) -> Steps[Dict[str, Any]]:
        """The broker's status object (clients, observers, handlers, queue, slots, buffers,
        counters). A large status comes in pages; this asks for each in turn and returns
        them merged; ``timeout`` bounds the whole walk."""
        limit = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + limit
        pages = StatusPages((yield Ask(self._session.status(), limit)))
        while pages.next is not None:
            pages.add((yield Ask(self._session.status(pages.next), status_time_left(deadline, limit))))
        return pages.whole()

    # -- what both fronts' plumbing decides --------------------------------------------

    def _limit(self, request: Request[Any], timeout: Optional[float]) -> float:
        """How long a request waits for its reply, in seconds."""
        return (self.timeout if timeout is None else timeout) + request.extra_wait

    def _start(self, request: Request[Any], waiter: Waiter) -> Optional[Tuple[int, int, bytes]]:
        """Start ``request`` on the session: the connection's generation, the request's
        id and its frame; ``None`` when the connection was lost before anything was sent
        and a reconnect may come (wait for it, then start again). Raises
        ``ConnectionLost`` when none will."""
        try:
            with self._session._lock:
                generation = self._session.generation
                request_id, data = self._session.start(request, waiter)
        except ConnectionLost:
            if not self._may_wait_for_reconnect():
                raise
            return None
        return generation, request_id, data

    def _resends(self, request: Request[Any], generation: int) -> bool:
        """Whether ``request``, sent on connection ``generation`` and failed with
        ``ConnectionLost``, goes out again: it carries a key, resending is on, and a new
        connection is being made or was made."""
        if not (request.keyed and self._resend_keyed) or self._closed:
            return False
        return self._may_wait_for_reconnect() or self._session.generation != generation

    def _reader_ended(self, generation: int, reason: str) -> None:
        """The reader of ``generation`` stopped, for ``reason`` unless the client closed."""
        if self._closed:
            reason = "connection closed by the client"
        self._connection_ended(generation, reason)


def timed_out(request: Request[Any], limit: float) -> RequestTimeout:
    """The error of a request whose reply did not come within ``limit`` seconds."""
    return RequestTimeout(f"no reply to {request.op} within {limit:g} s")


class MethodChannelFront:
    """The part of both clients' ``MethodChannel`` that does not depend on how they wait:
    its calls written once as steps, played as :class:`ClientFront`'s are."""

    def __init__(self, client: ClientFront, name: str) -> None:
        self._client = client
        #: The channel name.
        self.name = name

    def _drive(self, steps: Steps[_T]) -> Any:
        return self._client._drive(steps)  # type: ignore[attr-defined]

    @Call
    def invoke_method(self, method: str, arguments: Any = None, *, timeout: Optional[float] = None) -> Steps[Any]:
        """Call ``method`` on whichever process handles it; return its result.

        Raises ``MissingPluginError`` when no handler implements the method
        (``not_implemented``) and ``MethodCallError`` for any other error reply, with
        the handler's ``code``, ``message`` and ``details`` unchanged.
        """
        return (yield Ask(self._client._session.invoke(self.name, method, arguments), timeout))

    @call(
        threads="``handler`` runs on a thread of its own.",
        tasks="``handler`` may be a coroutine function; a plain function runs on the loop and must not "
        "block. Each call runs in a task of its own.",
    )
    def set_method_call_handler(
        self,
        handler: Optional[MethodCallHandler],
        method: Optional[str] = None,
        *,
        on_evicted: Optional[EvictionCallback] = None,
        timeout: Optional[float] = None,
    ) -> Steps[Optional[str]]:
        """Handle calls of ``method`` on this channel, or of every method without a
        handler of its own when ``method`` is ``None``. Return the handler id.

        ``handler(method, arguments)`` receives the method name (a ``str``) and the
        call's arguments as decoded JSON (``None`` when the invoker sent none), and
        returns the result (any JSON value). Raising ``MethodCallError`` returns that
        error; ``NotImplementedError`` returns ``not_implemented``; any other exception
        returns code ``"error"`` with the exception's text as message.

        The latest registration for a ``(channel, method)`` wins, across processes:
        when another one takes this handler's place, ``on_evicted`` gets an
        :class:`Eviction`. Replacing this connection's own handler is silent.

        ``handler=None`` removes this connection's handler for ``(channel, method)``, if
        it has one (gone already counts as removed), and returns ``None``.
        """
        session = self._client._session
        registry = self._client._registry
        if handler is not None:
            request = registered(
                session.handle(self.name, method, handler, on_evicted),
                registry,
                "handler",
                handler,
                on_evicted,
                channel=self.name,
                method=method,
            )
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
