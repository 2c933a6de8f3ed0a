"""Measures the desktop bridge across broker restarts, against the same real components as
the tests (private dbus-daemon, dbusmock's notification_daemon, broker, bridge): how soon
the bridge serves its channel on a restarted broker, and how fast the clicks it kept while
the broker was down are posted. Prints numbers; asserts nothing about time.

    python3 Tests/desktop/measure_restart.py
"""

import os
import shutil
import signal
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from conftest import Desktop, notification, wait_until  # noqa: E402

AGAIN = "serving channel 'notifications' again"
CLICKS = 100


def close_clients(d: Desktop) -> None:
    for c in d.clients:
        c.close()
    d.clients.clear()


def main() -> None:
    folder = tempfile.mkdtemp(prefix="nbd-", dir="/tmp")
    d = Desktop(folder)
    try:
        d.start_server()
        d.start_broker()
        d.start_bridge()
        channel = d.channel()
        ids = [channel.invoke_method("add", notification(f"n{i}"))["desktopId"] for i in range(CLICKS)]
        gaps = []
        for sig in (signal.SIGTERM, signal.SIGKILL, signal.SIGTERM, signal.SIGKILL, signal.SIGTERM):
            served = d.log().count(AGAIN)
            lost = d.log().count("the broker connection was lost")
            close_clients(d)
            d.broker.send_signal(sig)
            d.broker.wait(15)
            wait_until(
                lambda lost=lost: d.log().count("the broker connection was lost") > lost,
                "the bridge to see the broker go",
            )
            time.sleep(0.5)
            d.start_broker()
            accepting = time.monotonic()
            wait_until(lambda served=served: d.log().count(AGAIN) > served, "the bridge to serve again")
            gaps.append(f"{sig.name} {time.monotonic() - accepting:.3f}")
        print("broker accepting -> bridge serving again (s, 50 ms polling):", ", ".join(gaps))
        close_clients(d)
        d.broker.send_signal(signal.SIGTERM)
        d.broker.wait(15)
        d.tool("clicks", *[str(i) for i in ids])
        wait_until(lambda: d.log().count("kept until the broker is back") == CLICKS, "the clicks to be kept", 60)
        d.bridge.send_signal(signal.SIGSTOP)
        try:
            d.start_broker()
            d.observe_clicks()
        finally:
            start = time.monotonic()
            d.bridge.send_signal(signal.SIGCONT)
        got = [d.next_response()["notification"]["identifier"] for _ in ids]
        elapsed = time.monotonic() - start
        print(
            f"{CLICKS} clicks kept while the broker was down: posted in order {got == [f'n{i}' for i in range(CLICKS)]},"
            f" {elapsed:.3f} s from the bridge resuming (reconnect included)"
        )
    finally:
        d.close()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
