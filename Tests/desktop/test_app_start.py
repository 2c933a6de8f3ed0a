"""A click that nothing handles starts the app (`notifbus desktop --app-id ID`), against real
parts: a private dbus-daemon with a service folder (D-Bus activation), desktop files in the
test's own XDG folders, python-dbusmock's notification server, the broker and the bridge.
The app (started_app.py) makes the one call an app makes at start and writes down what it
gets; each test reads that.
"""

from __future__ import annotations

import os
import signal
import subprocess

import pytest

import notifbus

from conftest import BIN, INVITE, MESSAGE, WAIT, notification, wait_until

DEFAULT = "com.apple.UNNotificationDefaultActionIdentifier"
MAIL = "org.example.Mail"


def ready(desktop, *flags):
    desktop.start_server()
    desktop.start_broker()
    desktop.client().set_notification_categories([MESSAGE, INVITE])
    desktop.start_bridge("--app-id", MAIL, *flags)
    return desktop.channel()


def started(out):
    return [r for r in desktop_records(out) if "started" in r]


def desktop_records(out):
    from conftest import Desktop

    return Desktop.records(out)


def launches(out):
    return [r["launch"] for r in desktop_records(out) if "launch" in r]


def clicks(out):
    return [r["click"]["notification"]["identifier"] for r in desktop_records(out) if "click" in r]


def test_dbus_activation_starts_the_app_which_takes_the_click_once(desktop):
    out = desktop.install_app(MAIL, "dbus")
    channel = ready(desktop)
    n1 = notification("n1", "INVITE", userInfo={"emailId": "e-1"})
    shown = channel.invoke_method("add", n1)
    # The desktop file names the app: its name, its icon, and the desktop-entry hint.
    notify = desktop.calls("Notify")[0]
    assert notify[0] == f"Test {MAIL}" and notify[2] == f"{MAIL}-icon" and notify[6]["desktop-entry"] == MAIL
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "default")
    wait_until(lambda: launches(out), "the activated app to take its launch response")
    records = desktop_records(out)
    calls = [r for r in records if "dbus" in r]
    assert [(c["dbus"], c["action"], c["target"], c["platform"]) for c in calls] == [("Activate", None, [], {})]
    assert launches(out) == [{"actionIdentifier": DEFAULT, "notification": n1}]
    log = desktop.log()
    assert (
        f"starting {MAIL} for didReceive {DEFAULT} on n1: D-Bus activation: {MAIL} /org/example/Mail "
        "org.freedesktop.Application.Activate()" in log
    ), log
    wait_until(lambda: f"{MAIL} observes didReceive" in desktop.log(), "the bridge to see the app observe")
    # Running, the app gets the next click as didReceive; nothing is activated again.
    second = channel.invoke_method("add", notification("n2", "INVITE"))
    desktop.emit("ActionInvoked", "us", second["desktopId"], "ACCEPT")
    wait_until(lambda: clicks(out) == ["n2"], "the running app to get the second click")
    assert len([r for r in desktop_records(out) if "dbus" in r]) == 1 and len(started(out)) == 1
    assert desktop.client().peek("launch") is None


def test_a_foreground_action_activates_the_action_with_the_notification_and_its_token(desktop):
    out = desktop.install_app(MAIL, "dbus")
    channel = ready(desktop)
    shown = channel.invoke_method("add", notification("inv-1", "INVITE"))
    desktop.emit("ActivationToken", "us", shown["desktopId"], "token-7")
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "ACCEPT")
    wait_until(lambda: launches(out), "the activated app to take its launch response")
    calls = [(r["dbus"], r["action"], r["target"], r["platform"]) for r in desktop_records(out) if "dbus" in r]
    assert calls == [
        ("ActivateAction", "ACCEPT", ["inv-1"], {"activation-token": "token-7", "desktop-startup-id": "token-7"})
    ]
    assert [(r["actionIdentifier"], r["notification"]["identifier"]) for r in launches(out)] == [("ACCEPT", "inv-1")]


def test_exec_starts_the_app_which_takes_the_click_once(desktop):
    out = desktop.install_app(MAIL, "exec")
    channel = ready(desktop)
    shown = channel.invoke_method("add", notification("n1", "INVITE", userInfo={"emailId": "e-1"}))
    desktop.emit("ActivationToken", "us", shown["desktopId"], "token-9")
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "default")
    wait_until(lambda: launches(out), "the started app to take its launch response")
    first = started(out)
    assert len(first) == 1 and first[0]["argv"][:2] == ["exec", MAIL]
    assert first[0]["env"] == {"DESKTOP_STARTUP_ID": "token-9", "XDG_ACTIVATION_TOKEN": "token-9"}
    assert [r["notification"]["content"]["userInfo"] for r in launches(out)] == [{"emailId": "e-1"}]
    wait_until(lambda: f"{MAIL} observes didReceive" in desktop.log(), "the bridge to see the app observe")
    second = channel.invoke_method("add", notification("n2", "INVITE"))
    desktop.emit("ActionInvoked", "us", second["desktopId"], "default")
    wait_until(lambda: clicks(out) == ["n2"], "the running app to get the second click")
    assert len(started(out)) == 1 and len(launches(out)) == 1
    log = desktop.log()
    assert f"starting {MAIL} for didReceive {DEFAULT} on n1: Exec /usr/bin/python3 " in log and "(pid " in log, log


def test_twenty_clicks_during_a_start_reach_the_app_once_each_in_order(desktop):
    """One start; the first click through launch, the 19 that come while the app starts as
    didReceive once it observes, in the order they were clicked, none twice."""
    out = desktop.install_app(MAIL, "exec", args="--delay 1.5")
    channel = ready(desktop)
    ids = [channel.invoke_method("add", notification(f"n{i}", "INVITE"))["desktopId"] for i in range(20)]
    desktop.tool("clicks", str(ids[0]))
    wait_until(lambda: f"starting {MAIL}" in desktop.log(), "the first click to start the app")
    desktop.tool("clicks", *[str(i) for i in ids[1:]])
    wait_until(lambda: len(clicks(out)) == 19, "the app to get the 19 clicks after its launch response", limit=30)
    assert [r["notification"]["identifier"] for r in launches(out)] == ["n0"]
    assert clicks(out) == [f"n{i}" for i in range(1, 20)]
    assert len(started(out)) == 1
    log = desktop.log()
    assert log.count(f"starting {MAIL}") == 1, log
    assert "the 19 response(s) taken meanwhile go to it now" in log, log
    print(log)
    assert desktop.client().peek("launch") is None


@pytest.mark.parametrize(
    "exec_line,reason",
    [
        ("/bin/false", "/bin/false (pid {pid}) exited with status 1"),
        ("no-such-mail-app --x", "no-such-mail-app: not found"),
        ('mail "unclosed', "Exec: a quoted argument is not closed"),
    ],
    ids=["exit-status", "not-found", "bad-quoting"],
)
def test_a_failed_exec_is_logged_and_the_click_stays_in_launch(desktop, exec_line, reason):
    desktop.install_app(MAIL, "exec", exec_line=exec_line)
    channel = ready(desktop)
    shown = channel.invoke_method("add", notification("n1", "INVITE"))
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "default")
    wait_until(lambda: "could not start" in desktop.log(), "the bridge to give the start up")
    log = desktop.log()
    line = next(entry for entry in log.splitlines() if "could not start" in entry)
    pid = line.split("(pid ")[1].split(")")[0] if "(pid " in line else ""
    assert reason.format(pid=pid) in line and line.endswith("the click stays in slot 'launch'"), line
    taken = desktop.client().take("launch")
    assert taken["notification"]["identifier"] == "n1"


def test_a_dbus_activation_the_bus_cannot_make_is_a_failed_start(desktop):
    """DBusActivatable=true, but the bus has no service file for the name: ServiceUnknown."""
    desktop.install_app(MAIL, "exec", extra="DBusActivatable=true")
    channel = ready(desktop)
    shown = channel.invoke_method("add", notification("n1", "INVITE"))
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "default")
    wait_until(lambda: "could not start" in desktop.log(), "the bridge to give the start up")
    line = next(entry for entry in desktop.log().splitlines() if "could not start" in entry)
    assert f"D-Bus activation of {MAIL} failed: org.freedesktop.DBus.Error.ServiceUnknown" in line, line
    assert line.endswith("the click stays in slot 'launch'"), line
    assert desktop.client().take("launch")["notification"]["identifier"] == "n1"


def test_no_desktop_file_and_no_observer_in_time_are_failed_starts(desktop):
    channel = ready(desktop, "--start-timeout", "1s")
    assert f"app {MAIL}: no {MAIL}.desktop in " in desktop.log()
    shown = channel.invoke_method("add", notification("n1", "INVITE"))
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "default")
    wait_until(lambda: "could not start" in desktop.log(), "the bridge to give the start up")
    assert f"could not start {MAIL} for didReceive {DEFAULT} on n1: no {MAIL}.desktop in " in desktop.log()
    # An app that connects but never observes didReceive: the start fails after the bound.
    out = desktop.install_app(MAIL, "exec", args="--no-observer")
    again = channel.invoke_method("add", notification("n2", "INVITE"))
    desktop.emit("ActionInvoked", "us", again["desktopId"], "default")
    wait_until(lambda: "the app did not observe didReceive within 1 s" in desktop.log(), "the start to time out")
    # It took the launch response itself (a plain take): the bridge does not start it twice.
    assert [r["notification"]["identifier"] for r in launches(out)] == ["n2"]
    assert desktop.log().count(f"starting {MAIL}") == 1


def test_no_start_while_the_app_observes(desktop):
    out = desktop.install_app(MAIL, "exec")
    channel = ready(desktop)
    app = desktop.client()
    # The app runs and passes the click on: it is kept for launch, and nothing is started.
    app.receive_notification_responses(MAIL, lambda response: notifbus.PASS)
    shown = channel.invoke_method("add", notification("n1", "INVITE"))
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "default")
    wait_until(lambda: "observes didReceive (it runs), so it is not started" in desktop.log(), "the bridge to decline")
    assert started(out) == [] and "starting" not in desktop.log()


def test_a_bridge_killed_between_add_and_click_still_starts_the_app(desktop):
    out = desktop.install_app(MAIL, "exec")
    state = os.path.join(desktop.folder, "state")
    channel = ready(desktop, "--state-dir", state)
    shown = channel.invoke_method("add", notification("n1", "INVITE", userInfo={"emailId": "e-1"}))
    desktop.bridge.send_signal(signal.SIGKILL)
    desktop.bridge.wait(WAIT)
    desktop.start_bridge("--app-id", MAIL, "--state-dir", state)
    assert "read 1 delivered notification(s) from --state-dir" in desktop.log(), desktop.log()
    desktop.emit("ActionInvoked", "us", shown["desktopId"], "default")
    wait_until(lambda: launches(out), "the started app to take its launch response")
    assert [r["notification"]["content"]["userInfo"] for r in launches(out)] == [{"emailId": "e-1"}]
    # The click was written down: a third bridge does not post it again.
    desktop.bridge.send_signal(signal.SIGKILL)
    desktop.bridge.wait(WAIT)
    desktop.start_bridge("--app-id", MAIL, "--state-dir", state)
    assert channel.invoke_method("getDeliveredNotifications") == {"notifications": []}


def test_a_state_dir_is_forgotten_when_the_server_changed_meanwhile(desktop):
    state = os.path.join(desktop.folder, "state")
    channel = ready(desktop, "--state-dir", state)
    channel.invoke_method("add", notification("n1"))
    desktop.bridge.send_signal(signal.SIGKILL)
    desktop.bridge.wait(WAIT)
    desktop.stop_server()
    desktop.start_server()
    desktop.start_bridge("--state-dir", state)
    assert (
        "forgot the 1 delivered notification(s) read from --state-dir: the server that showed them is gone"
        in desktop.log()
    )
    assert channel.invoke_method("getDeliveredNotifications") == {"notifications": []}


def test_a_state_dir_that_others_can_write_is_refused(desktop):
    state = os.path.join(desktop.folder, "open")
    os.makedirs(state)
    os.chmod(state, 0o777)
    desktop.start_broker()
    out = subprocess.run(
        [str(BIN / "notifbus"), "desktop", "--socket", desktop.socket, "--state-dir", state],
        env=desktop.env,
        capture_output=True,
        text=True,
        timeout=WAIT,
    )
    assert out.returncode == 1 and "other users can write to it" in out.stderr, out.stderr
