#!/usr/bin/env python3
"""The Python link of the ThreeLanguages chain: observes willPresent at priority 20 with
Clients/python, prints what it saw and passes the event on. It decides nothing about
presentation; that is left to the observers after it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from typing import Any, NoReturn, Optional

import notifbus  # pip install ./Clients/python (run.sh puts it on PYTHONPATH instead)


def say(text: str) -> None:
    print(text, flush=True)


class Terminated(Exception):
    """SIGTERM or SIGINT arrived: the observer closes."""


def _on_signal(signum: int, _frame: Any) -> NoReturn:
    raise Terminated(signal.Signals(signum).name)


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
    parser.add_argument("--run-for", type=float, default=60.0, metavar="SECONDS", help="exit after this long (default 60)")
    options = parser.parse_args()

    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    bus: Optional[notifbus.Client] = None
    try:
        bus = notifbus.connect(name="python-observer")
        observer = bus.add_observer("willPresent", on_event, priority=options.priority)
        say(f"python observer {observer} on willPresent at priority {options.priority}")
        timer = threading.Timer(options.run_for, bus.close)
        timer.daemon = True
        timer.start()
        bus.run_forever()  # returns once the timer closes the connection
        say("python observer: --run-for has passed, closed")
        return 0
    except Terminated as why:
        say(f"python observer: closing ({why})")
        return 0
    except notifbus.ConnectionLost:
        print("python_observer.py: the connection to the broker was lost", file=sys.stderr)
        return 1
    except (OSError, notifbus.NotifbusError) as exc:
        print(f"python_observer.py: {exc}", file=sys.stderr)
        return 1
    finally:
        if bus is not None:
            bus.close()


if __name__ == "__main__":
    sys.exit(main())
