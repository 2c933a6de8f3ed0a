"""Fixtures for the desktop bridge's tests: a private D-Bus session bus whose only service
files are the ones a test writes (so nothing else is activated behind the test's back),
python-dbusmock's notification_daemon on it, a broker, and `notifbus-desktop`, all started
here and stopped after each test; the apps the bridge starts are described by desktop files
in the test's own XDG folders. Nothing inside notifbus is faked.
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
STARTED_APP = Path(__file__).resolve().parent / "started_app.py"
#: Bound of every wait in these tests.
WAIT = 15.0

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:dir={folder}</listen>
  <auth>EXTERNAL</auth>
  <servicedir>{folder}/services</servicedir>
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
        os.makedirs(os.path.join(folder, "services"))
        os.makedirs(os.path.join(folder, "data", "applications"))
        config = os.path.join(folder, "bus.conf")
        with open(config, "w") as f:
            f.write(BUS_CONFIG.format(folder=folder))
        self.bus = subprocess.Popen(
            ["dbus-daemon", "--config-file", config, "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.address = self.bus.stdout.readline().strip()
        assert self.address, "dbus-daemon printed no address"
        # Desktop files only from the test's own folder.
        self.env = dict(
            os.environ,
            DBUS_SESSION_BUS_ADDRESS=self.address,
            XDG_DATA_HOME=os.path.join(folder, "data"),
            XDG_DATA_DIRS=os.path.join(folder, "no-data"),
        )
        self.env.pop("DISPLAY", None)
        self.socket = os.path.join(folder, "bus.sock")
        self.server: Optional[subprocess.Popen] = None
        self.broker: Optional[subprocess.Popen] = None
        self.bridge: Optional[subprocess.Popen] = None
        self.bridge_log = os.path.join(folder, "bridge.log")
        self.clients: List[notifbus.Client] = []
        self.responses: "queue.Queue[Dict[str, Any]]" = queue.Queue()
        # The broker's --state-dir, once a test asks for one: every broker it starts then
        # keeps its slots, categories and once keys there.
        self.broker_state: Optional[str] = None

    # -- the fake server ---------------------------------------------------------------

    def start_server(self, capabilities: str = "actions body inline-reply") -> None:
        params = json.dumps({"capabilities": capabilities})
        log = open(os.path.join(self.folder, "server.log"), "ab")
        self.server = subprocess.Popen(
            [DEBIAN_PYTHON, "-m", "dbusmock", "--session", "-t", "notification_daemon", "-p", params],
            env=self.env,
            stdout=log,
            stderr=log,
        )
        wait_until(lambda: self.tool("owner") is not None, "the fake server to own its name")

    def stop_server(self) -> None:
        stop(self.server)
        wait_until(lambda: self.tool("owner") is None, "the fake server's name to be released")
        self.server = None

    def tool(self, *args: str) -> Any:
        out = subprocess.run(
            [DEBIAN_PYTHON, str(TOOL), *args], env=self.env, capture_output=True, text=True, timeout=WAIT
        )
        if out.returncode != 0:
            raise AssertionError(f"dbus_tool {args}: {out.stderr}")
        return json.loads(out.stdout)

    def calls(self, member: str) -> List[list]:
        return self.tool("calls", member)

    def emit(self, name: str, signature: str, *args: Any) -> None:
        self.tool("emit", name, signature, json.dumps(list(args)))

    # -- apps the bridge starts -----------------------------------------------------------

    def install_app(
        self, app_id: str, way: str = "exec", *, args: str = "", exec_line: Optional[str] = None, extra: str = ""
    ) -> str:
        """Writes the desktop file of `app_id` (and for way "dbus" its D-Bus service file),
        for started_app.py; returns the file the app writes what it gets to."""
        out = os.path.join(self.folder, f"{app_id}.out")
        command = f"{DEBIAN_PYTHON} {STARTED_APP} {way} {app_id} --socket {self.socket} --out {out} {args}".strip()
        lines = [
            "[Desktop Entry]",
            "Type=Application",
            f"Name=Test {app_id}",
            f"Icon={app_id}-icon",
            f"Exec={exec_line if exec_line is not None else command}",
        ]
        if way == "dbus":
            lines.append("DBusActivatable=true")
            with open(os.path.join(self.folder, "services", f"{app_id}.service"), "w") as f:
                f.write(f"[D-BUS Service]\nName={app_id}\nExec={command}\n")
            self.tool("reload")
        if extra:
            lines.append(extra)
        with open(os.path.join(self.folder, "data", "applications", f"{app_id}.desktop"), "w") as f:
            f.write("\n".join(lines) + "\n")
        return out

    @staticmethod
    def records(out: str) -> List[Dict[str, Any]]:
        """What the started app wrote so far, oldest first."""
        try:
            with open(out) as f:
                return [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []

    def stop_app(self, out: str) -> None:
        """Ends every process of the started app (it writes its pid when it starts)."""
        for record in self.records(out):
            if "started" in record:
                try:
                    os.kill(record["started"], signal.SIGTERM)
                except ProcessLookupError:
                    pass

    # -- notifbus ----------------------------------------------------------------------

    def start_broker(self, state_dir: bool = False) -> None:
        log = open(os.path.join(self.folder, "broker.log"), "ab")
        if state_dir:
            self.broker_state = os.path.join(self.folder, "broker-state")
        flags = ["--state-dir", self.broker_state] if self.broker_state else []
        self.broker = subprocess.Popen(
            [str(BIN / "notifbus"), "broker", "--socket", self.socket, *flags], stdout=log, stderr=log
        )
        wait_until(lambda: self._pings(), "the broker to accept connections")

    def _pings(self) -> bool:
        try:
            with notifbus.connect(self.socket, timeout=2) as c:
                c.ping()
            return True
        except OSError:
            return False

    def start_bridge(self, *flags: str) -> None:
        served = self.log().count("serving channel") if os.path.exists(self.bridge_log) else 0
        log = open(self.bridge_log, "ab")
        self.bridge = subprocess.Popen(
            [str(BIN / "notifbus"), "desktop", "--socket", self.socket, *flags], env=self.env, stdout=log, stderr=log
        )
        wait_until(
            lambda: self.log().count("serving channel") > served or self.bridge.poll() is not None,
            "the bridge to serve its channel",
        )
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
        for name in os.listdir(self.folder):
            if name.endswith(".out"):
                self.stop_app(os.path.join(self.folder, name))
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


MESSAGE = {
    "identifier": "MESSAGE",
    "options": ["customDismissAction"],
    "actions": [
        {
            "identifier": "REPLY",
            "title": "Reply",
            "options": [],
            "textInput": {"buttonTitle": "Send", "placeholder": "Write a reply"},
        },
        {"identifier": "DELETE", "title": "Delete", "options": ["destructive"]},
    ],
}
INVITE = {
    "identifier": "INVITE",
    "options": [],
    "actions": [{"identifier": "ACCEPT", "title": "Accept", "options": ["foreground"]}],
}


def notification(identifier: str, category: Optional[str] = None, **content: Any) -> Dict[str, Any]:
    body = {"title": "Ana", "body": "Lunch on Friday?", **content}
    if category:
        body["categoryIdentifier"] = category
    return {"identifier": identifier, "content": body}
