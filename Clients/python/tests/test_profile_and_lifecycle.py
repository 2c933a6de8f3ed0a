"""The notification profile (typed willPresent / didReceive / openSettings observers and
the launch payload), monitor, wait_closed / run_forever and the errors a newcomer meets
first (a missing socket, a wait out of range, a refusal raised once), against a real
broker, for both the blocking and the asyncio client."""

from __future__ import annotations

import asyncio
import functools
import logging
import threading
import time
from typing import Any, Awaitable, Callable, List

import pytest

import notifbus
import notifbus.aio
from notifbus import HANDLED, PASS, STOP, Notification, NotificationContent, NotificationResponse

from samples import CATEGORIES


def bounded(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), 30.0))

    return run


def wait_until(condition: Callable[[], bool], limit: float = 10.0) -> bool:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


def test_missing_socket_and_folder_are_named(tmp_path):
    missing = str(tmp_path / "none.sock")
    with pytest.raises(FileNotFoundError) as caught:
        notifbus.connect(missing, timeout=2)
    assert missing in str(caught.value)
    with pytest.raises(OSError) as caught:
        notifbus.connect(str(tmp_path), timeout=2)
    assert "is a folder, not a socket" in str(caught.value) and str(tmp_path) in str(caught.value)

    async def aio() -> None:
        with pytest.raises(FileNotFoundError) as caught:
            await notifbus.aio.connect(missing, timeout=2)
        assert missing in str(caught.value)

    asyncio.run(aio())


def test_take_wait_is_checked_in_seconds(broker):
    with notifbus.connect(broker.socket) as bus:
        with pytest.raises(ValueError, match=r"0 to 600 seconds"):
            bus.take("s", wait=601)
        with pytest.raises(ValueError, match=r"0 to 600 seconds"):
            bus.take("s", wait=-1)
        assert bus.take("s", wait=0.05) is None


def test_refusal_is_raised_once_and_not_logged(make_broker, caplog):
    crowded = make_broker(extra=["--max-clients", "1"])
    # The fixture's readiness probe counts until the broker has seen it close.
    deadline = time.monotonic() + 5
    while True:
        try:
            only = notifbus.connect(crowded.socket, timeout=5)
            break
        except notifbus.BrokerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with only:
        with caplog.at_level(logging.DEBUG, logger="notifbus"):
            with pytest.raises(notifbus.BrokerError) as caught:
                notifbus.connect(crowded.socket, timeout=5)
    assert caught.value.code == "too_many_clients"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text


def test_typed_observers_and_launch_response(broker):
    with notifbus.connect(broker.socket, name="profile") as bus:
        assert bus.set_notification_categories(CATEGORIES) == len(CATEGORIES)
        seen: List[Notification] = []

        def will_present(notification: Notification):
            seen.append(notification)
            return ["sound", "banner"] if notification.content.thread_identifier == "chat" else None

        bus.add_will_present_observer(will_present, priority=10)
        chat = Notification("m1", NotificationContent(title="Ana", thread_identifier="chat"))
        result = bus.post_will_present(chat)
        assert result.outcome == "completed"
        assert notifbus.presentation_options(result) == ["sound", "banner"]
        assert seen[0].identifier == "m1" and seen[0].content.title == "Ana"
        other = bus.post_will_present(Notification("m2"))
        assert other.outcome == "unhandled" and notifbus.presentation_options(other) is None

        responses: List[NotificationResponse] = []

        def did_receive(response: NotificationResponse):
            responses.append(response)
            return STOP if response.action_identifier == "stop-me" else PASS

        bus.add_did_receive_observer(did_receive)
        tap = NotificationResponse(
            notifbus.DEFAULT_ACTION_IDENTIFIER, Notification("m3", NotificationContent(title="Hi"))
        )
        clicked = bus.post_did_receive(tap)
        assert clicked.outcome == "unhandled" and clicked.retained == "launch"
        assert responses[0].is_default_action and responses[0].notification.identifier == "m3"
        launch = bus.launch_notification_response()
        assert launch is not None and launch.notification.identifier == "m3" and launch.is_default_action
        assert bus.launch_notification_response() is None

        bus.add_open_settings_observer(lambda notification: HANDLED if notification is None else PASS)
        assert bus.post_open_settings(None).outcome == "completed"
        assert bus.post_open_settings(Notification("m4")).outcome == "unhandled"


def test_an_app_takes_its_launch_response_then_observes_under_its_id(broker):
    """receive_notification_responses: the launch click once, then didReceive under the
    app id as key (the desktop bridge's sign that the app runs); a second app start gets
    no launch click and replaces the first observer."""
    with notifbus.connect(broker.socket, name="poster") as poster:
        poster.set_notification_categories(CATEGORIES)
        tap = NotificationResponse(notifbus.DEFAULT_ACTION_IDENTIFIER, Notification("m1"))
        assert poster.post_did_receive(tap).retained == "launch"
        got: List[str] = []
        with notifbus.connect(broker.socket, name="app") as app:
            start = app.receive_notification_responses(
                "org.example.Mail", lambda r: (got.append(r.notification.identifier), HANDLED)[1], activated_for="m1"
            )
            assert start.launch_response is not None and start.launch_response.notification.identifier == "m1"
            observers = poster.status()["observers"]
            assert [(o["observer"], o["key"], o["events"]) for o in observers] == [
                (start.observer, "org.example.Mail", ["didReceive"])
            ]
            later = NotificationResponse(notifbus.DEFAULT_ACTION_IDENTIFIER, Notification("m2"))
            assert poster.post_did_receive(later).outcome == "completed" and got == ["m2"]
            again = app.receive_notification_responses("org.example.Mail", lambda r: HANDLED)
            assert again.launch_response is None
            assert [o["observer"] for o in poster.status()["observers"]] == [again.observer]


@bounded
async def test_async_app_start(broker):
    async with await notifbus.aio.connect(broker.socket, name="app") as app:
        await app.set_notification_categories(CATEGORIES)
        tap = NotificationResponse(notifbus.DEFAULT_ACTION_IDENTIFIER, Notification("m9"))
        assert (await app.post_did_receive(tap)).retained == "launch"

        async def handle(response: NotificationResponse):
            return HANDLED

        start = await app.receive_notification_responses("org.example.Mail", handle)
        assert start.launch_response is not None and start.launch_response.notification.identifier == "m9"
        assert (await app.post_did_receive(tap)).outcome == "completed"


@bounded
async def test_async_typed_observers_monitor_and_run_forever(broker):
    async with await notifbus.aio.connect(broker.socket, name="watcher") as watcher:
        frames: List[notifbus.SeenFrame] = []
        await watcher.monitor(frames.append)
        bus = await notifbus.aio.connect(broker.socket, name="observer")

        async def will_present(notification: Notification):
            await asyncio.sleep(0)
            return []

        await bus.add_will_present_observer(will_present, key="quiet")
        runner = asyncio.ensure_future(bus.run_forever())
        async with await notifbus.aio.connect(broker.socket) as poster:
            result = await poster.post_will_present(Notification("m1"))
        assert result.outcome == "completed" and notifbus.presentation_options(result) == []
        assert any(f.frame.get("op") == "post" and f.direction == "in" for f in frames)
        assert all(isinstance(f.client, str) and f.client.startswith("c") for f in frames)
        assert not runner.done()
        await bus.close()
        await asyncio.wait_for(runner, 5)  # close() ends run_forever without an error


def test_wait_closed_and_run_forever_when_the_broker_goes_without_reconnection(make_broker):
    doomed = make_broker()
    bus = notifbus.connect(doomed.socket, reconnect=False)
    bus.add_observer("e", lambda event: notifbus.NEXT)
    errors: List[BaseException] = []

    def serve() -> None:
        try:
            bus.run_forever()
        except notifbus.ConnectionLost as exc:
            errors.append(exc)

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    assert not bus.wait_closed(0.2)
    doomed.process.terminate()
    assert bus.wait_closed(10)
    server.join(10)
    assert len(errors) == 1
    bus.close()


def test_monitor_sees_frames_in_order(broker):
    with notifbus.connect(broker.socket) as watcher:
        frames: List[notifbus.SeenFrame] = []
        watcher.monitor(frames.append)
        with notifbus.connect(broker.socket) as bus:
            for n in range(5):
                bus.put("s", n)
        assert wait_until(lambda: sum(1 for f in frames if f.frame.get("op") == "put") == 5)
        values = [f.frame["value"] for f in frames if f.frame.get("op") == "put"]
        assert values == [0, 1, 2, 3, 4]


@bounded
async def test_a_bounded_run_forever_leaves_the_connection_working(broker):
    async with await notifbus.aio.connect(broker.socket) as bus:
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(bus.run_forever(), timeout=0.2)
        await bus.ping()
        assert bus.connected
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(bus.wait_closed(), timeout=0.1)
        await bus.ping()
