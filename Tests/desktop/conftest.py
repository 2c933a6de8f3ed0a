"""Fixtures for the desktop bridge's tests: a private D-Bus session bus with no service
files (so nothing is activated behind the test's back), python-dbusmock's
notification_daemon on it, a broker, and `notifbus-desktop`, all started here and stopped
after each test. Nothing inside notifbus is faked.
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "Clients" / "python" / "src"))

import notifbus  # noqa: E402

BIN = Path(os.environ.get("NOTIFBUS_BIN", REPO / ".build" / "debug" / "notifbus")).parent
#: Debian's interpreter: python-dbusmock and the dbus module live there.
DEBIAN_PYTHON = "/usr/bin/python3"
TOOL = Path(__file__).resolve().parent / "dbus_tool.py"
#: Bound of every wait in these tests.
WAIT = 15.0

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={folder}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


def wait_until(condition, what: str, limit: float = WAIT):
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {limit} s waiting for {what}")


def stop(process: Optional[subprocess.Popen], sig=signal.SIGTERM) -> None:
    if process is None or process.poll() is not None:
        return
    process.send_signal(sig)
    try:
        process.wait(5)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


class Desktop:
    """One private session bus, with a fake notification server, a broker and the bridge."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        config = os.path.join(folder, "bus.conf")
        with open(config, "w") as f:
            f.write(BUS_CONFIG.format(folder=folder))
        self.bus = subprocess.Popen(["dbus-daemon", "--config-file", config, "--nofork", "--print-address=1"],
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.address = self.bus.stdout.readline().strip()
        assert self.address, "dbus-daemon printed no address"
        self.env = dict(os.environ, DBUS_SESSION_BUS_ADDRESS=self.address)
        self.env.pop("DISPLAY", None)
        self.socket = os.path.join(folder, "bus.sock")
        self.server: Optional[subprocess.Popen] = None
        self.broker: Optional[subprocess.Popen] = None
        self.bridge: Optional[subprocess.Popen] = None
        self.bridge_log = os.path.join(folder, "bridge.log")
        self.clients: List[notifbus.Client] = []
        self.responses: "queue.Queue[Dict[str, Any]]" = queue.Queue()

    # -- the fake server ---------------------------------------------------------------

    def start_server(self, capabilities: str = "actions body inline-reply") -> None:
        params = json.dumps({"capabilities": capabilities})
        log = open(os.path.join(self.folder, "server.log"), "ab")
        self.server = subprocess.Popen([DEBIAN_PYTHON, "-m", "dbusmock", "--session", "-t", "notification_daemon", "-p", params],
                                       env=self.env, stdout=log, stderr=log)
        wait_until(lambda: self.tool("owner") is not None, "the fake server to own its name")

    def stop_server(self) -> None:
        stop(self.server)
        wait_until(lambda: self.tool("owner") is None, "the fake server's name to be released")
        self.server = None

    def tool(self, *args: str) -> Any:
        out = subprocess.run([DEBIAN_PYTHON, str(TOOL), *args], env=self.env, capture_output=True, text=True, timeout=WAIT)
        if out.returncode != 0:
            raise AssertionError(f"dbus_tool {args}: {out.stderr}")
        return json.loads(out.stdout)

    def calls(self, member: str) -> List[list]:
        return self.tool("calls", member)

    def emit(self, name: str, signature: str, *args: Any) -> None:
        self.tool("emit", name, signature, json.dumps(list(args)))

    # -- notifbus ----------------------------------------------------------------------

    def start_broker(self) -> None:
        log = open(os.path.join(self.folder, "broker.log"), "ab")
        self.broker = subprocess.Popen([str(BIN / "notifbus"), "broker", "--socket", self.socket], stdout=log, stderr=log)
        wait_until(lambda: self._pings(), "the broker to accept connections")

    def _pings(self) -> bool:
        try:
            with notifbus.connect(self.socket, timeout=2) as c:
                c.ping()
            return True
        except OSError:
            return False

    def start_bridge(self, *flags: str) -> None:
        log = open(self.bridge_log, "ab")
        self.bridge = subprocess.Popen([str(BIN / "notifbus"), "desktop", "--socket", self.socket, *flags],
                                       env=self.env, stdout=log, stderr=log)
        wait_until(lambda: "serving channel" in self.log() or self.bridge.poll() is not None, "the bridge to serve its channel")
        assert self.bridge.poll() is None, f"the bridge exited: {self.log()}"

    def log(self) -> str:
        with open(self.bridge_log) as f:
            return f.read()

    def client(self) -> notifbus.Client:
        c = notifbus.connect(self.socket, name="desktop-test", timeout=WAIT)
        self.clients.append(c)
        return c

    def channel(self) -> notifbus.MethodChannel:
        return self.client().method_channel("notifications")

    def observe_clicks(self) -> None:
        """Records every didReceive payload (handled, so nothing is kept for launch)."""
        def on_click(event):
            self.responses.put(event.payload)
            return notifbus.Complete({"seen": True})
        self.client().add_observer("didReceive", on_click)

    def next_response(self) -> Dict[str, Any]:
        return self.responses.get(timeout=WAIT)

    def close(self) -> None:
        for c in self.clients:
            c.close()
        stop(self.bridge)
        stop(self.broker)
        if self.server is not None:
            self.server.send_signal(signal.SIGCONT)
        stop(self.server)
        stop(self.bus)


@pytest.fixture
def desktop():
    folder = tempfile.mkdtemp(prefix="nbd-", dir="/tmp")
    d = Desktop(folder)
    try:
        yield d
    finally:
        d.close()
        shutil.rmtree(folder, ignore_errors=True)


MESSAGE = {"identifier": "MESSAGE", "options": ["customDismissAction"], "actions": [
    {"identifier": "REPLY", "title": "Reply", "options": [],
     "textInput": {"buttonTitle": "Send", "placeholder": "Write a reply"}},
    {"identifier": "DELETE", "title": "Delete", "options": ["destructive"]}]}
INVITE = {"identifier": "INVITE", "options": [], "actions": [
    {"identifier": "ACCEPT", "title": "Accept", "options": ["foreground"]}]}


def notification(identifier: str, category: Optional[str] = None, **content: Any) -> Dict[str, Any]:
    body = {"title": "Ana", "body": "Lunch on Friday?", **content}
    if category:
        body["categoryIdentifier"] = category
    return {"identifier": identifier, "content": body}
