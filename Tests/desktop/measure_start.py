"""Measures how long a click on a notification of an app that is not running takes to reach
the app the bridge starts: from the click (`ActionInvoked` sent on the bus, by
python-dbusmock's server) to the started app holding the response (its
receive_notification_responses returned it), for each way of starting: D-Bus activation
(the bus daemon starts the app from its service file) and the desktop file's Exec line.
The same real parts as the tests: a private dbus-daemon, the broker, the bridge, the app in
Tests/desktop/started_app.py (Debian's Python). Prints numbers; asserts nothing about time.

    python3 Tests/desktop/measure_start.py [ROUNDS]
"""

import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import INVITE, MESSAGE, Desktop, notification, wait_until  # noqa: E402

APP = "org.example.Mail"


def launches(out):
    return [r for r in Desktop.records(out) if "launch" in r]


def measure(way: str, rounds: int) -> list:
    folder = tempfile.mkdtemp(prefix="nbm-", dir="/tmp")
    d = Desktop(folder)
    try:
        out = d.install_app(APP, way)
        d.start_server()
        d.start_broker()
        d.client().set_notification_categories([MESSAGE, INVITE])
        d.start_bridge("--app-id", APP)
        channel = d.channel()
        watcher = d.client()
        latencies = []
        for n in range(rounds):
            shown = channel.invoke_method("add", notification(f"n{n}", "INVITE"))
            before = len(launches(out))
            sent = d.tool("clicks", str(shown["desktopId"]))
            wait_until(
                lambda before=before: len(launches(out)) > before, f"round {n}: the app to hold its launch response"
            )
            latencies.append(launches(out)[-1]["at"] - sent)
            # The app quits before the next click, so that each click starts it again.
            wait_until(
                lambda n=n: "observes didReceive" in d.log().split(f"on n{n}:")[-1],
                f"round {n}: the bridge to see it observe",
            )
            d.stop_app(out)
            wait_until(
                lambda: not any(o["key"] == APP for o in watcher.status()["observers"]), f"round {n}: the app to quit"
            )
            if way == "dbus":
                wait_until(lambda: d.tool("has-owner", APP) is False, f"round {n}: the app's name to be released")
        return latencies
    finally:
        d.close()
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    print(f"click (ActionInvoked on the bus) to the started app holding the response, {rounds} rounds each")
    for way, what in (("dbus", "D-Bus activation"), ("exec", "Exec line")):
        started = time.monotonic()
        ms = sorted(1000 * x for x in measure(way, rounds))
        print(
            f"  {what:17} median {statistics.median(ms):7.1f} ms   min {ms[0]:7.1f}   max {ms[-1]:7.1f}"
            f"   ({time.monotonic() - started:.0f} s)"
        )


if __name__ == "__main__":
    main()
