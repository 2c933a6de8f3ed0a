"""End to end against a real notification server: dunst on Xvfb, on a private session bus.
A notification added through the Swift CLI is shown by dunst (`dunstctl count displayed`);
`dunstctl action 0` and `dunstctl close` come back as didReceive to an observer process
written in Python. And the terminated state: the mail app (mailclick-app --desktop) has
quit, its notification stays on the screen, and `dunstctl action 0` makes the bridge start
it from its desktop file; it opens the email of the click, also after the bridge was killed.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import pytest

from conftest import BIN, INVITE, MESSAGE, WAIT, Desktop, stop, wait_until

HERE = Path(__file__).resolve().parent
DEFAULT = "com.apple.UNNotificationDefaultActionIdentifier"
DISMISS = "com.apple.UNNotificationDismissActionIdentifier"

DUNSTRC = """[global]
    width = 420
    origin = top-right
    offset = 10x10
    font = DejaVu Sans 11
    show_indicators = yes
    format = "<b>%s</b>\\n%b"
[urgency_low]
    timeout = 0
[urgency_normal]
    timeout = 0
[urgency_critical]
    timeout = 0
"""


def start_xvfb(folder: str):
    """Xvfb on the first free display; returns (process, ":N")."""
    read, write = os.pipe()
    xvfb = subprocess.Popen(
        ["Xvfb", "-displayfd", str(write), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
        pass_fds=(write,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(write)
    with os.fdopen(read) as f:
        number = f.readline().strip()
    assert number, "Xvfb printed no display number"
    return xvfb, ":" + number


class RealDesktop(Desktop):
    def __init__(self, folder: str) -> None:
        super().__init__(folder)
        self.xvfb, self.display = start_xvfb(folder)
        self.env["DISPLAY"] = self.display
        self.observer = None
        self.lines: "queue.Queue[str]" = queue.Queue()

    def start_dunst(self) -> None:
        rc = os.path.join(self.folder, "dunstrc")
        with open(rc, "w") as f:
            f.write(DUNSTRC)
        log = open(os.path.join(self.folder, "dunst.log"), "ab")
        self.server = subprocess.Popen(["dunst", "-config", rc], env=self.env, stdout=log, stderr=log)
        wait_until(lambda: self.tool("owner") is not None, "dunst to own org.freedesktop.Notifications")

    def dunstctl(self, *args: str) -> str:
        out = subprocess.run(["dunstctl", *args], env=self.env, capture_output=True, text=True, timeout=WAIT)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def displayed(self) -> int:
        return int(self.dunstctl("count", "displayed"))

    def start_observer(self) -> None:
        self.observer = subprocess.Popen(
            ["python3", str(HERE / "click_observer.py"), self.socket],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        threading.Thread(
            target=lambda: [self.lines.put(line.strip()) for line in self.observer.stdout], daemon=True
        ).start()
        assert self.lines.get(timeout=WAIT) == "ready"

    def next_click(self):
        return json.loads(self.lines.get(timeout=WAIT))

    def deliver(self, *flags: str) -> str:
        out = subprocess.run(
            [str(BIN / "notifbus"), "notify", "--deliver", "--socket", self.socket, *flags],
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    def close(self) -> None:
        if self.observer is not None:
            self.observer.stdin.close()
            stop(self.observer)
        super().close()
        stop(self.xvfb)


@pytest.fixture
def real():
    folder = tempfile.mkdtemp(prefix="nbx-", dir="/tmp")
    d = RealDesktop(folder)
    try:
        d.start_dunst()
        d.start_broker()
        d.client().set_notification_categories([MESSAGE, INVITE])
        d.start_bridge("--app-name", "MailClick")
        d.start_observer()
        yield d
    finally:
        d.close()
        shutil.rmtree(folder, ignore_errors=True)


def test_dunst_shows_it_and_the_click_reaches_python(real):
    assert real.displayed() == 0
    capabilities = real.channel().invoke_method("capabilities")
    assert capabilities["name"] == "dunst" and "actions" in capabilities["capabilities"]
    line = real.deliver(
        "--id",
        "mail-1",
        "--title",
        "Ana",
        "--body",
        "Lunch on Friday?",
        "--category",
        "INVITE",
        "--user-info",
        '{"emailId":"e-1"}',
    )
    assert line.startswith("add mail-1: shown on the desktop as ")
    wait_until(lambda: real.displayed() == 1, "dunst to display the notification")
    real.dunstctl("action", "0")
    click = real.next_click()
    assert click == {
        "actionIdentifier": DEFAULT,
        "notification": {
            "identifier": "mail-1",
            "content": {
                "title": "Ana",
                "body": "Lunch on Friday?",
                "categoryIdentifier": "INVITE",
                "userInfo": {"emailId": "e-1"},
            },
        },
    }
    wait_until(lambda: real.displayed() == 0, "dunst to close the clicked notification")
    assert real.channel().invoke_method("getDeliveredNotifications") == {"notifications": []}

    # dunst sends NotificationClosed after the action: the next line must be the next click.
    real.deliver("--id", "mail-2", "--title", "Ben", "--body", "Contract", "--category", "MESSAGE")
    wait_until(lambda: real.displayed() == 1, "dunst to display the second notification")
    real.dunstctl("close")
    click = real.next_click()
    assert click["actionIdentifier"] == DISMISS and click["notification"]["identifier"] == "mail-2"
    wait_until(lambda: real.displayed() == 0, "dunst to close the dismissed notification")


def test_remove_closes_it_on_dunst(real):
    real.deliver("--id", "mail-3", "--title", "Cy", "--category", "MESSAGE")
    wait_until(lambda: real.displayed() == 1, "dunst to display the notification")
    assert real.channel().invoke_method("removeDeliveredNotifications", {"identifiers": ["mail-3"]}) == {
        "removed": ["mail-3"]
    }
    wait_until(lambda: real.displayed() == 0, "dunst to close it")
    # Closed by the call (reason 3): no dismiss response. The next line is the next click.
    real.deliver("--id", "mail-4", "--title", "Di", "--category", "INVITE")
    wait_until(lambda: real.displayed() == 1, "dunst to display the next notification")
    real.dunstctl("action", "0")
    assert real.next_click()["notification"]["identifier"] == "mail-4"


# -- the terminated state: the bridge starts the app ----------------------------------------

APP = "org.example.MailClick"


@pytest.fixture
def terminated():
    """dunst, a broker, and a bridge that starts mailclick-app (Swift, --desktop) from its
    desktop file for a click nothing handles, keeping its delivered table in a state folder."""
    folder = tempfile.mkdtemp(prefix="nbt-", dir="/tmp")
    d = RealDesktop(folder)
    d.env["NOTIFBUS_SOCKET"] = d.socket
    with open(os.path.join(folder, "data", "applications", f"{APP}.desktop"), "w") as f:
        f.write(
            f"[Desktop Entry]\nType=Application\nName=Mail\nIcon=mail-unread\n"
            f"Exec={BIN / 'mailclick-app'} --desktop {APP} --run-for 60\n"
        )
    d.state = os.path.join(folder, "state")
    d.app = None
    try:
        d.start_dunst()
        d.start_broker()
        d.client().set_notification_categories([MESSAGE, INVITE])
        d.start_bridge("--app-id", APP, "--state-dir", d.state)
        yield d
    finally:
        for line in d.log().splitlines():
            if f"starting {APP}" in line and "(pid " in line:
                stop_pid(int(line.rsplit("(pid ", 1)[1].rstrip(")")))
        stop(d.app)
        d.close()
        shutil.rmtree(folder, ignore_errors=True)


def stop_pid(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        pass


def app_observing(d) -> bool:
    return any(o["key"] == APP for o in d.client().status()["observers"])


def test_a_click_on_dunst_starts_the_app_that_had_quit(terminated):
    d = terminated
    # The app runs: a click reaches it as didReceive.
    d.app = subprocess.Popen(
        [str(BIN / "mailclick-app"), "--desktop", APP, "--run-for", "60"],
        env=d.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: "queue.Queue[str]" = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line.strip()) for line in d.app.stdout], daemon=True).start()
    wait_until(lambda: app_observing(d), "the app to observe didReceive")
    assert d.deliver("--id", "mail-e-1", "--title", "Ana", "--category", "INVITE", "--user-info", '{"emailId":"e-1"}')
    wait_until(lambda: d.displayed() == 1, "dunst to display the first mail")
    d.dunstctl("action", "0")
    seen = [lines.get(timeout=WAIT) for _ in range(4)]
    assert "[mail app] opening email e-1 (app in foreground/background)" in seen, seen
    # The app quits; a mail arrives and stays on the screen.
    stop(d.app)
    wait_until(lambda: not app_observing(d), "the app's observer to go")
    d.deliver("--id", "mail-e-2", "--title", "Ben", "--category", "INVITE", "--user-info", '{"emailId":"e-2"}')
    wait_until(lambda: d.displayed() == 1, "dunst to display the second mail")
    # The user clicks it: the bridge starts the app, which opens that email.
    d.dunstctl("action", "0")
    wait_until(
        lambda: "[mail app] launched by a click on email e-2: opening it" in d.log(), "the started app to open e-2"
    )
    log = d.log()
    assert "on mail-e-2: unhandled, retained for launch" in log and f"starting {APP} for didReceive" in log, log
    wait_until(lambda: d.displayed() == 0, "dunst to close the clicked notification")
    assert d.client().peek("launch") is None


def test_a_click_on_dunst_after_the_bridge_was_killed_still_starts_the_app(terminated):
    """dunst sends ActionInvoked to the connection that called Notify: after a SIGKILL and a
    restart, the bridge reads its table from the state folder and sees that signal on its
    way to its earlier connection."""
    d = terminated
    d.deliver("--id", "mail-e-3", "--title", "Cy", "--category", "INVITE", "--user-info", '{"emailId":"e-3"}')
    wait_until(lambda: d.displayed() == 1, "dunst to display the mail")
    d.bridge.send_signal(signal.SIGKILL)
    d.bridge.wait(WAIT)
    d.start_bridge("--app-id", APP, "--state-dir", d.state)
    log = d.log()
    assert "read 1 delivered notification(s) from --state-dir" in log, log
    assert "watching the signals the server sends to the bridge's earlier connection(s) :1." in log, log
    d.dunstctl("action", "0")
    wait_until(
        lambda: "[mail app] launched by a click on email e-3: opening it" in d.log(), "the started app to open e-3"
    )
    wait_until(lambda: d.displayed() == 0, "dunst to close the clicked notification")
