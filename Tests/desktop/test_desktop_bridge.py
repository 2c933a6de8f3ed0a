"""`notifbus desktop` against python-dbusmock's notification_daemon on a private session
bus: the exact Notify arguments, every signal mapping, one didReceive per notification,
presentation decisions, removal, a server that restarts, never answers, or is not there,
a broker that restarts (gracefully or killed) and a session bus that goes away. Signals
are injected with the mock's EmitSignal.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import threading
import time

import pytest

import notifbus

from conftest import INVITE, MESSAGE, WAIT, notification, wait_until

DEFAULT = "com.apple.UNNotificationDefaultActionIdentifier"
DISMISS = "com.apple.UNNotificationDismissActionIdentifier"


def ready(desktop, capabilities="actions body inline-reply", flags=(), categories=(MESSAGE, INVITE), state_dir=False):
    desktop.start_server(capabilities)
    desktop.start_broker(state_dir)
    desktop.client().set_notification_categories(list(categories))
    desktop.start_bridge(*flags)
    desktop.observe_clicks()
    return desktop.channel()


def marker(desktop, channel):
    """Adds a notification and clicks it: the next response after everything before."""
    result = channel.invoke_method("add", notification("marker"))
    desktop.emit("ActionInvoked", "us", result["desktopId"], "default")
    got = desktop.next_response()
    return got


# -- Notify arguments -------------------------------------------------------------------


def test_capabilities_are_the_servers(desktop):
    channel = ready(desktop, "actions body inline-reply persistence")
    assert channel.invoke_method("capabilities") == {
        "name": "mock-notify",
        "vendor": "test vendor",
        "version": "1.0",
        "specVersion": "1.1",
        "capabilities": ["actions", "body", "inline-reply", "persistence"],
    }


def test_text_input_category_on_an_inline_reply_server(desktop):
    channel = ready(desktop, flags=("--app-name", "Mail"))
    n = notification(
        "m1",
        "MESSAGE",
        subtitle="Re: Friday",
        threadIdentifier="ana",
        sound="message-new-instant",
        badge=4,
        userInfo={"emailId": "e-1", "token": "SECRET-TOKEN"},
    )
    result = channel.invoke_method("add", n)
    assert result == {"presented": True, "options": ["banner"], "desktopId": 1}
    calls = desktop.calls("Notify")
    assert calls == [
        [
            "Mail",
            0,
            "",
            "Ana",
            "Re: Friday\nLunch on Friday?",
            ["default", "Open", "inline-reply", "Reply", "DELETE", "Delete"],
            {
                "suppress-sound": True,
                "urgency": {"byte": 1},
                "x-dunst-stack-tag": "ana",
                "x-kde-reply-placeholder-text": "Write a reply",
                "x-kde-reply-submit-button-text": "Send",
            },
            -1,
        ]
    ]
    assert "SECRET-TOKEN" not in repr(calls) and "emailId" not in repr(calls)
    print("Notify arguments:", calls[0])


def test_text_input_fallback_without_inline_reply(desktop):
    channel = ready(desktop, "actions body")
    channel.invoke_method("add", notification("m1", "MESSAGE"))
    assert desktop.calls("Notify")[0][5] == ["default", "Open", "REPLY", "Reply", "DELETE", "Delete"]
    assert "x-kde-reply-placeholder-text" not in desktop.calls("Notify")[0][6]
    desktop.emit("ActionInvoked", "us", 1, "REPLY")
    got = desktop.next_response()
    assert got["actionIdentifier"] == "REPLY" and got["userText"] == ""


def test_no_actions_capability_sends_no_actions(desktop):
    channel = ready(desktop, "body")
    channel.invoke_method("add", notification("m1", "MESSAGE"))
    assert desktop.calls("Notify")[0][5] == []


def test_body_markup_is_escaped(desktop):
    channel = ready(desktop, "actions body body-markup")
    channel.invoke_method("add", notification("m1", body="a <b> & c"))
    assert desktop.calls("Notify")[0][4] == "a &lt;b&gt; &amp; c"


def test_sound_when_the_chain_asks_for_it(desktop):
    channel = ready(desktop)
    desktop.client().add_observer("willPresent", lambda e: notifbus.Complete(["sound", "banner"]))
    result = channel.invoke_method("add", notification("s1", sound="bell"))
    assert result["options"] == ["sound", "banner"]
    hints = desktop.calls("Notify")[0][6]
    assert hints["sound-name"] == "bell" and "suppress-sound" not in hints


def test_same_identifier_replaces_in_place(desktop):
    channel = ready(desktop)
    first = channel.invoke_method("add", notification("m1", body="one"))
    second = channel.invoke_method("add", notification("m1", body="two"))
    calls = desktop.calls("Notify")
    assert [c[1] for c in calls] == [0, first["desktopId"]]
    assert second["desktopId"] == first["desktopId"]
    delivered = channel.invoke_method("getDeliveredNotifications")["notifications"]
    assert [d["notification"]["content"]["body"] for d in delivered] == ["two"]


def test_same_identifier_added_twice_at_once_leaves_one(desktop):
    channel = ready(desktop, flags=("--verbose",))
    other = desktop.channel()
    desktop.server.send_signal(signal.SIGSTOP)
    results = []
    try:
        threads = [
            threading.Thread(
                target=lambda ch=ch, body=body: results.append(ch.invoke_method("add", notification("m1", body=body)))
            )
            for ch, body in ((channel, "one"), (other, "two"))
        ]
        for t in threads:
            t.start()
        # Both Notify calls are sent (replaces_id 0: neither is answered yet) before the server runs again.
        wait_until(lambda: desktop.log().count("Notify(") == 2, "both Notify calls to be sent")
    finally:
        desktop.server.send_signal(signal.SIGCONT)
    for t in threads:
        t.join(WAIT)
    assert sorted(r["desktopId"] for r in results) == [1, 2]
    delivered = channel.invoke_method("getDeliveredNotifications")["notifications"]
    assert len(delivered) == 1
    kept = delivered[0]["desktopId"]
    wait_until(lambda: desktop.calls("CloseNotification") == [[3 - kept]], "the superseded one to be closed")


# -- presentation decisions -------------------------------------------------------------


def test_completed_with_no_options_is_not_presented(desktop):
    channel = ready(desktop)
    desktop.client().add_observer("willPresent", lambda e: notifbus.Complete([]))
    assert channel.invoke_method("add", notification("q1")) == {"presented": False, "options": [], "desktopId": None}
    assert desktop.calls("Notify") == []


def test_stopped_is_not_presented(desktop):
    channel = ready(desktop)
    desktop.client().add_observer("willPresent", lambda e: notifbus.STOP)
    assert channel.invoke_method("add", notification("q1"))["presented"] is False
    assert desktop.calls("Notify") == []


def test_badge_only_is_not_presented(desktop):
    channel = ready(desktop)
    desktop.client().add_observer("willPresent", lambda e: notifbus.Complete(["badge"]))
    assert channel.invoke_method("add", notification("q1")) == {
        "presented": False,
        "options": ["badge"],
        "desktopId": None,
    }


def test_list_is_presented(desktop):
    channel = ready(desktop)
    desktop.client().add_observer("willPresent", lambda e: notifbus.Complete(["list"]))
    assert channel.invoke_method("add", notification("q1"))["presented"] is True


def test_unhandled_none(desktop):
    channel = ready(desktop, flags=("--unhandled", "none"))
    assert channel.invoke_method("add", notification("q1")) == {"presented": False, "options": [], "desktopId": None}


def test_bad_arguments(desktop):
    channel = ready(desktop)
    with pytest.raises(notifbus.MethodCallError) as e:
        channel.invoke_method("add", {"content": {}})
    assert e.value.code == "bad_arguments"
    with pytest.raises(notifbus.MethodCallError) as e:
        channel.invoke_method("removeDeliveredNotifications", {"identifiers": [1]})
    assert e.value.code == "bad_arguments"
    with pytest.raises(notifbus.MissingPluginError):
        channel.invoke_method("requestAuthorization")


def test_a_nul_in_a_text_is_refused_naming_the_field(desktop):
    """A D-Bus string cannot carry a NUL: the server would show "before" alone. The add is
    refused with bad_arguments naming the field, and nothing reaches the server."""
    channel = ready(desktop)
    for field in ("title", "subtitle", "body"):
        with pytest.raises(notifbus.MethodCallError) as e:
            channel.invoke_method("add", notification("n1", **{field: "before\u0000after"}))
        assert e.value.code == "bad_arguments" and f"content.{field} contains a NUL character" in str(e.value), e.value
    assert desktop.calls("Notify") == []
    assert channel.invoke_method("add", notification("n1", title="before after"))["presented"] is True


# -- responses --------------------------------------------------------------------------


def test_default_action_then_closed_gives_one_response(desktop):
    channel = ready(desktop)
    n = notification("m1", "INVITE", userInfo={"emailId": "e-1"})
    channel.invoke_method("add", n)
    desktop.emit("ActionInvoked", "us", 1, "default")
    desktop.emit("NotificationClosed", "uu", 1, 2)
    got = desktop.next_response()
    assert got == {"actionIdentifier": DEFAULT, "notification": n}
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"


def test_category_action(desktop):
    channel = ready(desktop)
    channel.invoke_method("add", notification("inv", "INVITE"))
    desktop.emit("ActionInvoked", "us", 1, "ACCEPT")
    desktop.emit("ActionInvoked", "us", 1, "ACCEPT")
    desktop.emit("NotificationClosed", "uu", 1, 2)
    assert desktop.next_response()["actionIdentifier"] == "ACCEPT"
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"


def test_inline_reply(desktop):
    channel = ready(desktop)
    channel.invoke_method("add", notification("m1", "MESSAGE"))
    desktop.emit("NotificationReplied", "us", 1, "See you at noon")
    desktop.emit("NotificationClosed", "uu", 1, 2)
    got = desktop.next_response()
    assert got["actionIdentifier"] == "REPLY" and got["userText"] == "See you at noon"
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"


def test_dismissed_by_user_with_custom_dismiss_action(desktop):
    channel = ready(desktop)
    channel.invoke_method("add", notification("m1", "MESSAGE"))
    desktop.emit("NotificationClosed", "uu", 1, 2)
    got = desktop.next_response()
    assert got["actionIdentifier"] == DISMISS and "userText" not in got


@pytest.mark.parametrize("category,reason", [("INVITE", 2), ("MESSAGE", 1), ("MESSAGE", 3), ("MESSAGE", 4), (None, 2)])
def test_closes_that_post_nothing(desktop, category, reason):
    channel = ready(desktop)
    channel.invoke_method("add", notification("m1", category))
    desktop.emit("NotificationClosed", "uu", 1, reason)
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"


def test_unknown_ids_and_keys_and_other_senders_are_ignored(desktop):
    channel = ready(desktop)
    channel.invoke_method("add", notification("m1", "INVITE"))
    desktop.emit("ActionInvoked", "us", 99, "default")
    desktop.emit("ActionInvoked", "us", 1, "NOT-AN-ACTION")
    subprocess.run(
        [
            "gdbus",
            "emit",
            "--session",
            "--object-path",
            "/org/freedesktop/Notifications",
            "--signal",
            "org.freedesktop.Notifications.ActionInvoked",
            "1",
            "'ACCEPT'",
        ],
        env=desktop.env,
        check=True,
        timeout=WAIT,
    )
    desktop.emit("ActionInvoked", "us", 1, "default")
    got = desktop.next_response()
    assert got["actionIdentifier"] == DEFAULT and got["notification"]["identifier"] == "m1"


def test_clicks_are_posted_in_the_order_they_came(desktop):
    channel = ready(desktop)
    ids = [channel.invoke_method("add", notification(f"n{i}"))["desktopId"] for i in range(30)]
    desktop.tool("clicks", *[str(i) for i in ids])
    got = [desktop.next_response()["notification"]["identifier"] for _ in ids]
    assert got == [f"n{i}" for i in range(30)]


# -- delivered notifications ------------------------------------------------------------


def test_remove_and_list_delivered(desktop):
    channel = ready(desktop)
    for i in (1, 2, 3):
        channel.invoke_method("add", notification(f"m{i}", "MESSAGE", userInfo={"n": i}))
    listed = channel.invoke_method("getDeliveredNotifications")["notifications"]
    assert [
        (d["desktopId"], d["notification"]["identifier"], d["notification"]["content"]["userInfo"]) for d in listed
    ] == [(1, "m1", {"n": 1}), (2, "m2", {"n": 2}), (3, "m3", {"n": 3})]
    assert channel.invoke_method("removeDeliveredNotifications", {"identifiers": ["m2", "nope"]}) == {"removed": ["m2"]}
    assert desktop.calls("CloseNotification") == [[2]]
    desktop.emit("NotificationClosed", "uu", 2, 2)
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"
    assert channel.invoke_method("removeAllDeliveredNotifications") == {"removed": ["m1", "m3"]}
    assert channel.invoke_method("getDeliveredNotifications") == {"notifications": []}


# -- robustness -------------------------------------------------------------------------


def test_server_restart_resets_and_rereads_capabilities(desktop):
    channel = ready(desktop, "actions body inline-reply")
    channel.invoke_method("add", notification("m1", "MESSAGE"))
    desktop.stop_server()
    wait_until(lambda: "forgot 1 delivered" in desktop.log(), "the bridge to forget the old server's notifications")
    assert channel.invoke_method("getDeliveredNotifications") == {"notifications": []}
    desktop.start_server("actions body")
    wait_until(
        lambda: "capabilities: actions body\n" in desktop.log(), "the bridge to read the new server's capabilities"
    )
    assert channel.invoke_method("capabilities")["capabilities"] == ["actions", "body"]
    channel.invoke_method("add", notification("m2", "MESSAGE"))
    assert desktop.calls("Notify")[0][5] == ["default", "Open", "REPLY", "Reply", "DELETE", "Delete"]


def test_a_server_that_never_answers_times_out(desktop):
    channel = ready(desktop, flags=("--dbus-timeout", "1s"))
    desktop.server.send_signal(signal.SIGSTOP)
    try:
        with pytest.raises(notifbus.MethodCallError) as e:
            channel.invoke_method("add", notification("m1"))
        assert e.value.code == "notification_server_timeout"
        with pytest.raises(notifbus.MethodCallError) as e:
            channel.invoke_method("capabilities")
        assert e.value.code == "notification_server_timeout"
    finally:
        desktop.server.send_signal(signal.SIGCONT)
    assert channel.invoke_method("add", notification("m2"))["presented"] is True


def test_no_server(desktop):
    desktop.start_broker()
    desktop.start_bridge()
    channel = desktop.channel()
    for method, args in (("capabilities", None), ("add", notification("m1"))):
        with pytest.raises(notifbus.MethodCallError) as e:
            channel.invoke_method(method, args)
        assert e.value.code == "no_notification_server", e.value
    desktop.start_server("actions body")
    wait_until(lambda: "capabilities: actions body" in desktop.log(), "the bridge to see the server arrive")
    assert channel.invoke_method("add", notification("m1"))["presented"] is True


def test_sigterm_posts_the_responses_already_taken(desktop):
    """Clicks the bridge has taken from the server exist nowhere else: on SIGTERM each one
    is still posted, in order, before the bridge exits 0."""
    desktop.start_server()
    desktop.start_broker()
    desktop.start_bridge()
    got: "queue.Queue[str]" = queue.Queue()

    def slow(event):
        got.put(event.payload["notification"]["identifier"])
        time.sleep(0.3)
        return notifbus.Complete({"seen": True})

    desktop.client().add_observer("didReceive", slow)
    channel = desktop.channel()
    ids = [channel.invoke_method("add", notification(f"n{i}"))["desktopId"] for i in range(5)]
    desktop.tool("clicks", *[str(i) for i in ids])
    assert got.get(timeout=WAIT) == "n0"
    desktop.bridge.send_signal(signal.SIGTERM)
    assert desktop.bridge.wait(WAIT) == 0, desktop.log()
    rest = [got.get(timeout=WAIT) for _ in ids[1:]]
    assert rest == [f"n{i}" for i in range(1, 5)]
    log = desktop.log()
    assert "stopping (signal 15); posting" in log and "stopped; every response taken was posted" in log, log


def test_max_delivered_closes_the_oldest_on_the_desktop(desktop):
    """A notification the bridge forgets leaves the screen: its answer would post nothing."""
    channel = ready(desktop, flags=("--max-delivered", "2"))
    ids = [channel.invoke_method("add", notification(f"m{i}"))["desktopId"] for i in range(3)]
    wait_until(lambda: desktop.calls("CloseNotification") == [[ids[0]]], "the oldest notification to be closed")
    listed = channel.invoke_method("getDeliveredNotifications")["notifications"]
    assert [d["notification"]["identifier"] for d in listed] == ["m1", "m2"]
    desktop.emit("ActionInvoked", "us", ids[0], "default")
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"
    assert "closing 1 oldest notification(s) to stay within --max-delivered 2" in desktop.log()


AGAIN = "serving channel 'notifications' again"


def broker_down(desktop, sig=signal.SIGTERM, after_stop=None):
    """Stops the broker (SIGTERM: gracefully; SIGKILL: no answer to anything), closes the
    test's clients (so that none reconnects on its own) and waits until the bridge knows."""
    lost = desktop.log().count("the broker connection was lost")
    desktop.broker.send_signal(sig)
    desktop.broker.wait(WAIT)
    if after_stop is not None:
        after_stop()
    for c in desktop.clients:
        c.close()
    desktop.clients.clear()
    wait_until(lambda: desktop.log().count("the broker connection was lost") > lost, "the bridge to see the broker go")
    assert desktop.bridge.poll() is None, desktop.log()


def broker_back(desktop):
    """Starts a broker on the same socket with an observer of didReceive connected before the
    bridge can post anything to it (the bridge is paused meanwhile), and waits until the
    bridge serves its channel there."""
    served = desktop.log().count(AGAIN)
    desktop.bridge.send_signal(signal.SIGSTOP)
    try:
        desktop.start_broker()
        desktop.observe_clicks()
    finally:
        desktop.bridge.send_signal(signal.SIGCONT)
    wait_until(lambda: desktop.log().count(AGAIN) > served, "the bridge to serve its channel again")
    return desktop.channel()


def test_the_bridge_serves_a_restarted_broker_and_keeps_its_notifications(desktop):
    channel = ready(desktop)
    before = channel.invoke_method("add", notification("before", body="delivered before the restart"))
    broker_down(desktop)
    channel = broker_back(desktop)
    assert desktop.bridge.poll() is None
    delivered = channel.invoke_method("getDeliveredNotifications")["notifications"]
    assert [d["notification"]["identifier"] for d in delivered] == ["before"]
    after = channel.invoke_method("add", notification("after"))
    assert after["presented"] is True and after["desktopId"] != before["desktopId"]
    desktop.emit("ActionInvoked", "us", before["desktopId"], "default")
    got = desktop.next_response()
    assert got["actionIdentifier"] == DEFAULT and got["notification"]["identifier"] == "before"
    assert got["notification"]["content"]["body"] == "delivered before the restart"
    desktop.emit("ActionInvoked", "us", after["desktopId"], "default")
    assert desktop.next_response()["notification"]["identifier"] == "after"


def test_clicks_while_the_broker_is_down_are_posted_in_order_once_it_is_back(desktop):
    channel = ready(desktop)
    ids = [channel.invoke_method("add", notification(f"n{i}"))["desktopId"] for i in range(5)]
    broker_down(desktop)
    desktop.tool("clicks", *[str(i) for i in ids])
    wait_until(lambda: desktop.log().count("kept until the broker is back") == 5, "the bridge to keep the five clicks")
    channel = broker_back(desktop)
    got = [desktop.next_response()["notification"]["identifier"] for _ in ids]
    assert got == [f"n{i}" for i in range(5)]
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"
    print(desktop.log())


def test_an_app_that_reconnects_by_itself_gets_the_clicks_kept_meanwhile(desktop):
    """Nothing paused: the broker restarts, and the bridge and the app's observer (the
    Python client, which reconnects by itself) race back; the bridge waits for an observer
    of didReceive before posting what it kept."""
    channel = ready(desktop)
    ids = [channel.invoke_method("add", notification(f"n{i}"))["desktopId"] for i in range(3)]
    lost = desktop.log().count("the broker connection was lost")
    desktop.broker.send_signal(signal.SIGTERM)
    desktop.broker.wait(WAIT)
    wait_until(lambda: desktop.log().count("the broker connection was lost") > lost, "the bridge to see the broker go")
    desktop.tool("clicks", *[str(i) for i in ids])
    wait_until(lambda: desktop.log().count("kept until the broker is back") == 3, "the bridge to keep the clicks")
    desktop.start_broker()
    assert [desktop.next_response()["notification"]["identifier"] for _ in ids] == ["n0", "n1", "n2"]
    assert "no observer of didReceive is back" not in desktop.log()


def test_kept_clicks_with_no_observer_back_are_posted_after_the_grace(desktop):
    channel = ready(desktop)
    added = channel.invoke_method("add", notification("n0"))
    broker_down(desktop)
    desktop.emit("ActionInvoked", "us", added["desktopId"], "default")
    wait_until(lambda: "kept until the broker is back" in desktop.log(), "the bridge to keep the click")
    desktop.start_broker()
    wait_until(lambda: "on n0: unhandled" in desktop.log(), "the click to be posted with nobody observing")
    log = desktop.log()
    assert "no observer of didReceive is back after 3 s; posting the responses kept anyway" in log
    assert "on n0: unhandled, retained for launch" in log, log
    launched = desktop.client().take("launch")
    assert launched["notification"]["identifier"] == "n0"


def held_click(desktop, state_dir=False):
    """A broker, a bridge, an observer that holds the first didReceive until released, and
    two clicks: n0 in flight (held by the observer), n1 queued behind it. Returns the
    release event and the list of the responses the observer saw."""
    desktop.start_server()
    desktop.start_broker(state_dir)
    desktop.start_bridge()
    holding, release = threading.Event(), threading.Event()
    seen = []

    def hold(event):
        seen.append(event.payload["notification"]["identifier"])
        holding.set()
        release.wait(WAIT)
        return notifbus.Complete({"seen": True})

    desktop.client().add_observer("didReceive", hold)
    channel = desktop.channel()
    ids = [channel.invoke_method("add", notification(f"n{i}"))["desktopId"] for i in range(2)]
    desktop.tool("clicks", *[str(i) for i in ids])
    assert holding.wait(WAIT)
    return release, seen


def test_a_post_the_stopping_broker_answered_shutting_down_is_posted_again(desktop):
    release, _ = held_click(desktop)
    broker_down(desktop, signal.SIGTERM, after_stop=release.set)
    assert "didReceive %s on n0 got no answer" % DEFAULT in desktop.log()
    broker_back(desktop)
    assert [desktop.next_response()["notification"]["identifier"] for _ in range(2)] == ["n0", "n1"]
    wait_until(lambda: "on n0 (posted again): " in desktop.log(), "the log to say n0 was posted again")


def test_a_chain_cut_by_a_killed_broker_is_not_run_again(desktop):
    """n0's chain runs when the broker (with --state-dir) is SIGKILLed: its once key is on
    disk as running, so the post the bridge sends again is answered interrupted, and n0
    never reaches an observer a second time; n1 goes on."""
    release, seen = held_click(desktop, state_dir=True)
    broker_down(desktop, signal.SIGKILL, after_stop=release.set)
    channel = broker_back(desktop)
    wait_until(
        lambda: "on n0 was cut short: the broker stopped while its chain ran" in desktop.log(),
        "the bridge to hear that n0 was interrupted",
    )
    assert desktop.next_response()["notification"]["identifier"] == "n1"
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"
    assert seen == ["n0"], seen


def broker_holds_unread_input(pid: int) -> bool:
    """Whether one of the broker's Unix sockets has bytes it has not read (ss: Recv-Q)."""
    out = subprocess.run(["ss", "-xpn"], capture_output=True, text=True, timeout=WAIT).stdout
    for line in out.splitlines():
        fields = line.split()
        if f"pid={pid}," in line and len(fields) > 2 and fields[2].isdigit() and int(fields[2]) > 0:
            return True
    return False


@pytest.mark.parametrize("state_dir", [True, False], ids=["state-dir", "in-memory"])
def test_a_click_the_killed_broker_never_read_is_posted_again_and_handled_once(desktop, state_dir):
    """The bridge has sent n0's post, but the broker (stopped) never read it when it is
    SIGKILLed: nothing ran it, so the post sent again under its key runs it, once."""
    channel = ready(desktop, state_dir=state_dir)
    added = channel.invoke_method("add", notification("n0"))
    desktop.broker.send_signal(signal.SIGSTOP)
    desktop.emit("ActionInvoked", "us", added["desktopId"], "default")
    wait_until(lambda: broker_holds_unread_input(desktop.broker.pid), "the click's post to wait in the broker's socket")
    broker_down(desktop, signal.SIGKILL)
    channel = broker_back(desktop)
    got = desktop.next_response()
    assert got["notification"]["identifier"] == "n0"
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"
    assert desktop.responses.empty()
    assert "may have been handled" not in desktop.log()


def test_an_add_cut_by_the_broker_stopping_shows_nothing(desktop):
    ready(desktop)
    deciding = threading.Event()

    def slow(event):
        deciding.set()
        time.sleep(1)
        return notifbus.Complete(["banner"])

    desktop.client().add_observer("willPresent", slow)
    channel = desktop.channel()
    failed: "queue.Queue[BaseException]" = queue.Queue()

    def add():
        try:
            channel.invoke_method("add", notification("cut"))
        except BaseException as e:  # noqa: BLE001 - the test reads it
            failed.put(e)

    thread = threading.Thread(target=add)
    thread.start()
    assert deciding.wait(WAIT)
    broker_down(desktop)
    thread.join(WAIT)
    assert not thread.is_alive()
    assert isinstance(failed.get(timeout=WAIT), notifbus.NotifbusError)
    # While the broker is down an add cannot even reach the bridge: the invoker's client says so at once.
    with pytest.raises(OSError):
        notifbus.connect(desktop.socket, timeout=2)
    channel = broker_back(desktop)
    channel.invoke_method("add", notification("shown"))
    assert [c[4] for c in desktop.calls("Notify")] == ["Lunch on Friday?"]
    delivered = channel.invoke_method("getDeliveredNotifications")["notifications"]
    assert [d["notification"]["identifier"] for d in delivered] == ["shown"]


def test_sigterm_while_the_broker_is_down_is_bounded(desktop):
    channel = ready(desktop)
    ids = [channel.invoke_method("add", notification(f"n{i}"))["desktopId"] for i in range(2)]
    broker_down(desktop)
    desktop.tool("clicks", *[str(i) for i in ids])
    wait_until(lambda: desktop.log().count("kept until the broker is back") == 2, "the bridge to keep both clicks")
    desktop.bridge.send_signal(signal.SIGTERM)
    assert desktop.bridge.wait(WAIT) == 1
    log = desktop.log()
    assert "posting 2 response(s) still queued once the broker is back" in log, log
    assert "didReceive %s on n0 not posted" % DEFAULT in log and "didReceive %s on n1 not posted" % DEFAULT in log
    assert "2 response(s) not posted or not answered within 5 s; exiting" in log


def test_sigterm_logs_a_post_still_unanswered_after_5_s(desktop):
    release, _ = held_click(desktop)
    try:
        desktop.bridge.send_signal(signal.SIGTERM)
        assert desktop.bridge.wait(WAIT) == 1
    finally:
        release.set()
    log = desktop.log()
    assert "didReceive %s on n0 posted, with no answer yet" % DEFAULT in log, log
    assert "didReceive %s on n1 not posted" % DEFAULT in log
    assert "2 response(s) not posted or not answered within 5 s; exiting" in log


def test_sigterm_while_the_broker_is_down_posts_once_it_is_back(desktop):
    channel = ready(desktop)
    ids = [channel.invoke_method("add", notification(f"n{i}"))["desktopId"] for i in range(2)]
    broker_down(desktop)
    desktop.tool("clicks", *[str(i) for i in ids])
    wait_until(lambda: desktop.log().count("kept until the broker is back") == 2, "the bridge to keep both clicks")
    desktop.bridge.send_signal(signal.SIGSTOP)
    try:
        desktop.start_broker()
        desktop.observe_clicks()
        desktop.bridge.send_signal(signal.SIGTERM)
    finally:
        desktop.bridge.send_signal(signal.SIGCONT)
    assert desktop.bridge.wait(WAIT) == 0, desktop.log()
    assert [desktop.next_response()["notification"]["identifier"] for _ in ids] == ["n0", "n1"]


def test_another_handler_taking_the_channel_meanwhile_ends_the_bridge(desktop):
    ready(desktop)
    broker_down(desktop)
    desktop.bridge.send_signal(signal.SIGSTOP)
    try:
        desktop.start_broker()
        other = desktop.client()
        other.method_channel("notifications").set_method_call_handler(lambda method, arguments: {"mine": True})
    finally:
        desktop.bridge.send_signal(signal.SIGCONT)
    assert desktop.bridge.wait(WAIT) == 1
    assert "another process took over the 'notifications' channel" in desktop.log()
    assert desktop.channel().invoke_method("capabilities") == {"mine": True}


def test_no_broker_at_start_is_exit_1(desktop):
    from conftest import BIN

    out = subprocess.run(
        [str(BIN / "notifbus"), "desktop", "--socket", desktop.socket],
        env=desktop.env,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert out.returncode == 1 and "cannot connect" in out.stderr, out.stderr


def test_the_session_bus_going_away_ends_the_bridge_with_exit_1(desktop):
    ready(desktop)
    desktop.bus.kill()
    desktop.bus.wait(WAIT)
    assert desktop.bridge.wait(WAIT) == 1
    assert "the session bus connection" in desktop.log(), desktop.log()


def test_no_session_bus_is_a_clear_error(desktop):
    desktop.start_broker()
    env = dict(desktop.env)
    env.pop("DBUS_SESSION_BUS_ADDRESS")
    from conftest import BIN

    out = subprocess.run(
        [str(BIN / "notifbus"), "desktop", "--socket", desktop.socket],
        env=env,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert out.returncode == 1 and "DBUS_SESSION_BUS_ADDRESS is not set" in out.stderr


def test_help_and_usage_errors():
    from conftest import BIN

    out = subprocess.run([str(BIN / "notifbus"), "desktop", "--help"], capture_output=True, text=True, timeout=WAIT)
    assert (
        out.returncode == 0
        and "Usage: notifbus desktop [--socket PATH] [--app-id ID] [--app-name NAME] [--state-dir DIR]" in out.stdout
    )
    assert "When the broker goes away the bridge reconnects by itself" in out.stdout
    out = subprocess.run(
        [str(BIN / "notifbus"), "desktop", "--unhandled", "loud"], capture_output=True, text=True, timeout=WAIT
    )
    assert out.returncode == 2 and "--unhandled must be banner or none" in out.stderr
    for bad in ("../x", "a/b", ".hidden", ""):
        out = subprocess.run(
            [str(BIN / "notifbus"), "desktop", "--app-id", bad], capture_output=True, text=True, timeout=WAIT
        )
        assert out.returncode == 2 and "--app-id needs a desktop file id" in out.stderr and f"not '{bad}'" in out.stderr
    out = subprocess.run(
        [str(BIN / "notifbus"), "desktop", "--start-timeout", "soon"], capture_output=True, text=True, timeout=WAIT
    )
    assert out.returncode == 2 and "--start-timeout needs a duration such as 10s or 500ms, not 'soon'" in out.stderr
    for bad in ("0", "many", "1000001"):
        out = subprocess.run(
            [str(BIN / "notifbus"), "desktop", "--max-delivered", bad], capture_output=True, text=True, timeout=WAIT
        )
        assert out.returncode == 2 and f"--max-delivered needs a count from 1 to 1000000, not '{bad}'" in out.stderr


def test_cli_notify_deliver(desktop):
    ready(desktop)
    from conftest import BIN

    out = subprocess.run(
        [
            str(BIN / "notifbus"),
            "notify",
            "--deliver",
            "--id",
            "c1",
            "--title",
            "Hi",
            "--category",
            "INVITE",
            "--socket",
            desktop.socket,
        ],
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "add c1: shown on the desktop as 1 (banner)"
    assert desktop.calls("Notify")[0][3] == "Hi"
