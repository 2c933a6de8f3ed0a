"""The notification profile, as the Swift client has it: typed values for notifications
and responses, typed observers for the three delegate methods, typed posts and the
launch payload. Conversions only; the broker checks payloads and decides.

    UNUserNotificationCenterDelegate method     event         observer / post
    userNotificationCenter(_:willPresent:...)   willPresent   add_will_present_observer / post_will_present
    userNotificationCenter(_:didReceive:...)    didReceive    add_did_receive_observer / post_did_receive
    userNotificationCenter(_:openSettingsFor:)  openSettings  add_open_settings_observer / post_open_settings
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, Dict, List, Optional, Sequence, TypeVar, Union

from ._front import Call, ClientFront, Steps, Tasks, call
from ._types import NEXT, STOP, Complete, Event, PostResult, Verdict

#: ``UNNotificationDefaultActionIdentifier``: the user tapped the notification itself.
DEFAULT_ACTION_IDENTIFIER = "com.apple.UNNotificationDefaultActionIdentifier"
#: ``UNNotificationDismissActionIdentifier``: the user dismissed it.
DISMISS_ACTION_IDENTIFIER = "com.apple.UNNotificationDismissActionIdentifier"
#: The slot where the broker keeps an unhandled click that would launch the app.
LAUNCH_SLOT = "launch"
#: How long :meth:`~ProfileFront.receive_notification_responses` waits for the launch
#: response of an app started by D-Bus activation: the desktop bridge puts it in ``launch``
#: before it activates the app, so it is there; the wait covers a broker that is slow.
ACTIVATION_WAIT = 5.0
#: ``UNNotificationPresentationOptions``, by their wire names.
PRESENTATION_OPTIONS = ("badge", "sound", "list", "banner", "alert")

#: A ``did_receive`` or ``open_settings`` observer's answers besides ``STOP``:
#: ``HANDLED`` ends the chain completed, ``PASS`` gives it to the next observer.
#: ``Complete(value)`` is handled with a value for the poster.
HANDLED = Complete(None)
PASS = NEXT


@dataclass
class NotificationContent:
    """``UNNotificationContent``: what the notification shows."""

    title: Optional[str] = None
    subtitle: Optional[str] = None
    body: Optional[str] = None
    category_identifier: Optional[str] = None
    thread_identifier: Optional[str] = None
    user_info: Dict[str, Any] = field(default_factory=dict)
    badge: Optional[int] = None
    sound: Optional[str] = None

    _WIRE = (
        ("title", "title"),
        ("subtitle", "subtitle"),
        ("body", "body"),
        ("category_identifier", "categoryIdentifier"),
        ("thread_identifier", "threadIdentifier"),
        ("badge", "badge"),
        ("sound", "sound"),
    )

    def to_json(self) -> Dict[str, Any]:
        out = {wire: getattr(self, name) for name, wire in self._WIRE if getattr(self, name) is not None}
        if self.user_info:
            out["userInfo"] = dict(self.user_info)
        return out

    @classmethod
    def from_json(cls, data: Any) -> "NotificationContent":
        data = data if isinstance(data, dict) else {}
        content = cls(**{name: data.get(wire) for name, wire in cls._WIRE})
        content.user_info = dict(data.get("userInfo") or {})
        return content


@dataclass
class Notification:
    """``UNNotification``: its request's identifier, where it came from and its content."""

    identifier: str
    content: NotificationContent = field(default_factory=NotificationContent)
    #: ``"remote"``, ``"local"`` or ``None``.
    source: Optional[str] = None

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"identifier": self.identifier, "content": self.content.to_json()}
        if self.source is not None:
            out["source"] = self.source
        return out

    @classmethod
    def from_json(cls, data: Any) -> "Notification":
        if not isinstance(data, dict) or not isinstance(data.get("identifier"), str):
            raise ValueError(f"not a notification: {data!r}")
        return cls(data["identifier"], NotificationContent.from_json(data.get("content")), data.get("source"))


@dataclass
class NotificationResponse:
    """``UNNotificationResponse`` (and ``UNTextInputNotificationResponse``): what the
    user did with a notification."""

    action_identifier: str
    notification: Notification
    #: What the user typed into a text-input action.
    user_text: Optional[str] = None

    @property
    def is_default_action(self) -> bool:
        return self.action_identifier == DEFAULT_ACTION_IDENTIFIER

    @property
    def is_dismiss_action(self) -> bool:
        return self.action_identifier == DISMISS_ACTION_IDENTIFIER

    def to_json(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {"actionIdentifier": self.action_identifier, "notification": self.notification.to_json()}
        if self.user_text is not None:
            out["userText"] = self.user_text
        return out

    @classmethod
    def from_json(cls, data: Any) -> "NotificationResponse":
        if not isinstance(data, dict) or not isinstance(data.get("actionIdentifier"), str):
            raise ValueError(f"not a notification response: {data!r}")
        return cls(data["actionIdentifier"], Notification.from_json(data.get("notification")), data.get("userText"))


def presentation_options(result: PostResult) -> Optional[List[str]]:
    """The options a ``willPresent`` post completed with, in the observer's order, or
    ``None`` when no observer decided to present (stopped, unhandled)."""
    if result.outcome != "completed" or not isinstance(result.value, list):
        return None
    return [str(name) for name in result.value]


def _options_answer(options: Optional[Sequence[str]]) -> Verdict:
    if options is None:
        return NEXT
    names = list(options)
    for name in names:
        if name not in PRESENTATION_OPTIONS:
            raise ValueError(f"unknown presentation option {name!r}; expected {', '.join(PRESENTATION_OPTIONS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"repeated presentation option in {names!r}")
    return Complete(names)


def _delegate_answer(reply: Any) -> Verdict:
    if reply is None:
        return NEXT
    if reply is NEXT or reply is STOP or isinstance(reply, Complete):
        return reply
    raise ValueError(f"a delegate observer returns HANDLED, PASS, STOP or Complete(value), not {reply!r}")


def _open_settings_notification(payload: Any) -> Optional[Notification]:
    data = payload.get("notification") if isinstance(payload, dict) else None
    return None if data is None else Notification.from_json(data)


def _typed_observer(
    client: Any, read: Callable[[Any], Any], answer: Callable[[Any], Verdict], handler: Callable[[Any], Any]
) -> Callable[[Event], Any]:
    """A plain observer from a typed one: it reads the payload, answers ``next`` when it
    does not read, and converts the typed answer; for the asyncio client it awaits a
    handler's coroutine first."""
    if isinstance(client, Tasks):

        async def awaiting(event: Event) -> Verdict:
            try:
                value = read(event.payload)
            except (ValueError, TypeError, KeyError):
                return NEXT
            outcome = handler(value)
            if inspect.isawaitable(outcome):
                outcome = await outcome
            return answer(outcome)

        return awaiting

    def observer(event: Event) -> Verdict:
        try:
            value = read(event.payload)
        except (ValueError, TypeError, KeyError):
            return NEXT
        return answer(handler(value))

    return observer


def _will_present_notification(payload: Any) -> Notification:
    return Notification.from_json(payload.get("notification") if isinstance(payload, dict) else None)


def _launch_response(value: Any) -> Optional[NotificationResponse]:
    return None if value is None else NotificationResponse.from_json(value)


@dataclass(frozen=True)
class AppStart:
    """What an app gets from :meth:`~ProfileFront.receive_notification_responses`."""

    #: The click that started the app, taken once from slot ``launch``; ``None`` when the
    #: app started without one.
    launch_response: Optional["NotificationResponse"]
    #: The app's ``didReceive`` observer (its key is the app id).
    observer: str


_V = TypeVar("_V")
_A = TypeVar("_A")
#: A typed observer's handler: it gets the typed value and answers; the asyncio client
#: awaits an answer that is awaitable.
TypedHandler = Callable[[_V], Union[_A, Awaitable[_A]]]

#: What the asyncio client's typed observers may be besides plain functions.
_COROUTINE_HANDLER = "``handler`` may be a coroutine function."


class ProfileFront:
    """The profile methods of both clients, written once as steps (``_front.Call``);
    each client plays them its own way, as its other calls."""

    @call(tasks=_COROUTINE_HANDLER)
    def add_will_present_observer(
        self,
        handler: TypedHandler[Notification, Optional[Sequence[str]]],
        *,
        priority: int = 100,
        key: Optional[str] = None,
        **kwargs: Any,
    ) -> Steps[str]:
        """Observe ``willPresent``: ``handler(notification)`` returns the presentation
        options (``["banner", "sound"]``; ``[]`` means do not present), or ``None`` to pass
        it to the next observer. Returns the observer id."""
        observer = _typed_observer(self, _will_present_notification, _options_answer, handler)
        return (
            yield from ClientFront.add_observer.steps(
                self, "willPresent", observer, priority=priority, key=key, **kwargs
            )
        )

    @call(tasks=_COROUTINE_HANDLER)
    def add_did_receive_observer(
        self,
        handler: TypedHandler[NotificationResponse, Verdict],
        *,
        priority: int = 100,
        key: Optional[str] = None,
        **kwargs: Any,
    ) -> Steps[str]:
        """Observe ``didReceive``: ``handler(response)`` returns ``HANDLED`` (or
        ``Complete(value)``), ``PASS`` or ``STOP``. Returns the observer id."""
        observer = _typed_observer(self, NotificationResponse.from_json, _delegate_answer, handler)
        return (
            yield from ClientFront.add_observer.steps(
                self, "didReceive", observer, priority=priority, key=key, **kwargs
            )
        )

    @call(tasks=_COROUTINE_HANDLER)
    def add_open_settings_observer(
        self,
        handler: TypedHandler[Optional[Notification], Verdict],
        *,
        priority: int = 100,
        key: Optional[str] = None,
        **kwargs: Any,
    ) -> Steps[str]:
        """Observe ``openSettings``: ``handler(notification_or_None)`` returns ``HANDLED``,
        ``PASS`` or ``STOP``. Returns the observer id."""
        observer = _typed_observer(self, _open_settings_notification, _delegate_answer, handler)
        return (
            yield from ClientFront.add_observer.steps(
                self, "openSettings", observer, priority=priority, key=key, **kwargs
            )
        )

    @Call
    def post_will_present(
        self, notification: Notification, *, once: Optional[str] = None, timeout: Optional[float] = None
    ) -> Steps[PostResult]:
        """Post ``willPresent``; :func:`presentation_options` reads the decision."""
        payload = {"notification": notification.to_json()}
        return (yield from ClientFront.post.steps(self, "willPresent", payload, once=once, timeout=timeout))

    @Call
    def post_did_receive(
        self, response: NotificationResponse, *, once: Optional[str] = None, timeout: Optional[float] = None
    ) -> Steps[PostResult]:
        """Post ``didReceive``; the broker refuses what the categories do not allow (``invalid_action``)."""
        return (yield from ClientFront.post.steps(self, "didReceive", response.to_json(), once=once, timeout=timeout))

    @Call
    def post_open_settings(
        self, notification: Optional[Notification], *, once: Optional[str] = None, timeout: Optional[float] = None
    ) -> Steps[PostResult]:
        """Post ``openSettings``, from a notification or (``None``) from the system settings."""
        payload = {"notification": None if notification is None else notification.to_json()}
        return (yield from ClientFront.post.steps(self, "openSettings", payload, once=once, timeout=timeout))

    @Call
    def launch_notification_response(
        self, wait: Optional[float] = None, *, timeout: Optional[float] = None
    ) -> Steps[Optional[NotificationResponse]]:
        """Take the response that launched the app (slot ``launch``), once; ``None`` when
        there is none. ``wait`` (seconds) waits that long for one to arrive."""
        return _launch_response((yield from ClientFront.take.steps(self, LAUNCH_SLOT, wait, timeout=timeout)))

    @call(tasks=_COROUTINE_HANDLER)
    def receive_notification_responses(
        self,
        app_id: str,
        handler: TypedHandler[NotificationResponse, Verdict],
        *,
        activated_for: Optional[str] = None,
        wait: Optional[float] = None,
        priority: int = 100,
        timeout: Optional[float] = None,
    ) -> Steps[AppStart]:
        """The one call an app makes at start where ``notifbus desktop --app-id APP_ID``
        may start it (Protocol/DESKTOP.md §7): takes the response that launched the app from
        slot ``launch`` (once; ``None`` when none did), then observes ``didReceive`` with
        ``handler`` under the key ``app_id``, which tells the bridge the app runs and hands
        it the clicks that came while it started, in order. ``activated_for`` is the
        notification identifier of a D-Bus activation (the target of ``ActivateAction``):
        the response is then waited for up to ``wait`` (default :data:`ACTIVATION_WAIT`)
        and is the same one; the D-Bus call itself is not a second click."""
        if wait is None and activated_for is not None:
            wait = ACTIVATION_WAIT
        launch = _launch_response((yield from ClientFront.take.steps(self, LAUNCH_SLOT, wait, timeout=timeout)))
        observer = yield from ProfileFront.add_did_receive_observer.steps(self, handler, priority=priority, key=app_id)
        return AppStart(launch, observer)


class BlockingProfile(ProfileFront):
    """The profile methods of the blocking :class:`notifbus.Client`."""


class AsyncProfile(ProfileFront):
    """The profile methods of :class:`notifbus.aio.Client`; handlers may be coroutines."""
