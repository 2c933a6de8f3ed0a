"""The app `notifbus desktop --app-id ID` starts in the tests: it makes the one call an app
makes at start (the Python client's receive_notification_responses) and writes what it
gets, one JSON line each, to --out:

    {"started": pid, "at": t, "argv": [...], "env": {...}}      when it runs
    {"dbus": "Activate"|"ActivateAction", "action": ..., "target": [...], "platform": {...}, "at": t}
    {"launch": response-or-null, "at": t}                           its launch response
    {"click": response, "at": t}                                    each didReceive after that

`at` is time.monotonic(), which every process on the machine shares. Two ways to start:

    started_app.py exec ID --socket S --out F [--delay SECONDS]
        run by the bridge from the desktop file's Exec line
    started_app.py dbus ID --socket S --out F [--delay SECONDS]
        run by the bus daemon from a D-Bus service file (Debian's /usr/bin/python3, which has
        dbus-python and GLib): owns ID, serves org.freedesktop.Application at its object path,
        and on the first Activate or ActivateAction connects to the broker

--delay makes the start slow (clicks come meanwhile); --no-observer connects but never
observes (a start that never completes). It runs until SIGTERM.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Clients" / "python" / "src"))

import notifbus  # noqa: E402

OUT_LOCK = threading.Lock()


def write(path: str, record: dict) -> None:
    record["at"] = time.monotonic()
    with OUT_LOCK, open(path, "a") as f:
        f.write(json.dumps(record, sort_keys=True) + "\n")


def to_json(response):
    return None if response is None else response.to_json()


class App:
    def __init__(self, options: argparse.Namespace) -> None:
        self.options = options
        self.bus = None
        self.started = threading.Event()

    def start(self, activated_for=None) -> None:
        """The app's start: connect, take the launch response, observe under the app id."""
        if self.started.is_set():
            return
        self.started.set()
        if self.options.delay:
            time.sleep(self.options.delay)
        self.bus = notifbus.connect(self.options.socket, name=self.options.app_id)
        if self.options.no_observer:
            write(self.options.out, {"launch": to_json(self.bus.launch_notification_response())})
            return

        def on_click(response):
            write(self.options.out, {"click": response.to_json()})
            return notifbus.HANDLED

        start = self.bus.receive_notification_responses(self.options.app_id, on_click, activated_for=activated_for)
        write(self.options.out, {"launch": to_json(start.launch_response)})


def run_exec(app: App) -> None:
    # Blocked before the client starts its threads, so that sigwait below receives them.
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})
    app.start()
    signal.sigwait({signal.SIGTERM, signal.SIGINT})


def run_dbus(app: App) -> None:
    import dbus
    import dbus.mainloop.glib
    import dbus.service
    from gi.repository import GLib

    dbus.mainloop.glib.DBusGMainLoop(set_as_default=True)
    bus = dbus.StarterBus()
    path = "/" + app.options.app_id.replace(".", "/").replace("-", "_")

    class Application(dbus.service.Object):
        @dbus.service.method("org.freedesktop.Application", in_signature="a{sv}")
        def Activate(self, platform_data):
            self.record("Activate", None, [], platform_data)

        @dbus.service.method("org.freedesktop.Application", in_signature="sava{sv}")
        def ActivateAction(self, action, parameter, platform_data):
            self.record("ActivateAction", str(action), [str(p) for p in parameter], platform_data)

        @dbus.service.method("org.freedesktop.Application", in_signature="asa{sv}")
        def Open(self, uris, platform_data):
            self.record("Open", None, [str(u) for u in uris], platform_data)

        def record(self, member, action, target, platform_data):
            write(
                app.options.out,
                {
                    "dbus": member,
                    "action": action,
                    "target": target,
                    "platform": {str(k): str(v) for k, v in platform_data.items()},
                },
            )
            # The call is answered at once; the app's start goes on beside the main loop.
            activated_for = target[0] if target else None
            threading.Thread(target=app.start, args=(activated_for,), daemon=True).start()

    Application(bus, path)
    name = dbus.service.BusName(app.options.app_id, bus)  # noqa: F841  (owned while it lives)
    loop = GLib.MainLoop()
    GLib.unix_signal_add(GLib.PRIORITY_DEFAULT, signal.SIGTERM, loop.quit)
    loop.run()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("way", choices=["exec", "dbus"])
    parser.add_argument("app_id")
    parser.add_argument("--socket", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--delay", type=float, default=0.0)
    parser.add_argument("--no-observer", action="store_true")
    options = parser.parse_args()
    env = {k: os.environ[k] for k in ("DESKTOP_STARTUP_ID", "XDG_ACTIVATION_TOKEN") if k in os.environ}
    write(options.out, {"started": os.getpid(), "argv": sys.argv[1:], "env": env})
    app = App(options)
    if options.way == "exec":
        run_exec(app)
    else:
        run_dbus(app)
    return 0


if __name__ == "__main__":
    sys.exit(main())
