#!/usr/bin/env python3
"""The Python link of the ThreeLanguages chain: observes willPresent at priority 20 with
Clients/python, prints what it saw and passes the event on. It decides nothing about
presentation; that is left to the observers after it.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
from pathlib import Path

import notifbus  # pip install ./Clients/python (run.sh puts it on PYTHONPATH instead)

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from example_support import run_client, say  # noqa: E402  (importable only once the path above is in place)


def on_event(event: notifbus.Event) -> notifbus.Verdict:
    content = ((event.payload or {}).get("notification") or {}).get("content") or {}
    say(
        f"python observer {event.observer} saw {event.name} event {event.event}: "
        f"title {json.dumps(content.get('title'))}, body {json.dumps(content.get('body'))}; answering next"
    )
    return notifbus.NEXT


def main() -> int:
    parser = argparse.ArgumentParser(description="Observes willPresent and passes it on (socket from NOTIFBUS_SOCKET).")
    parser.add_argument("--priority", type=int, default=20, help="place in the chain; lower runs first (default 20)")
    parser.add_argument(
        "--run-for", type=float, default=60.0, metavar="SECONDS", help="exit after this long (default 60)"
    )
    options = parser.parse_args()
    return run_client("python_observer.py", "python observer", "python-observer", lambda bus: serve(bus, options))


def serve(bus: notifbus.Client, options: argparse.Namespace) -> int:
    """Observe willPresent until --run-for has passed."""
    observer = bus.add_observer("willPresent", on_event, priority=options.priority)
    say(f"python observer {observer} on willPresent at priority {options.priority}")
    timer = threading.Timer(options.run_for, bus.close)
    timer.daemon = True
    timer.start()
    bus.run_forever()  # returns once the timer closes the connection
    say("python observer: --run-for has passed, closed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
