"""A didReceive observer in its own process, on the Python client: prints "ready", then
every response it receives as one JSON line, and handles it. Ends when stdin closes.

    python3 click_observer.py SOCKET
"""

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Clients" / "python" / "src"))

import notifbus  # noqa: E402


def main() -> int:
    with notifbus.connect(sys.argv[1], name="python-click-observer") as bus:

        def on_click(event):
            print(json.dumps(event.payload, sort_keys=True), flush=True)
            return notifbus.Complete({"handledBy": "python"})

        bus.add_observer("didReceive", on_click, priority=10)
        print("ready", flush=True)
        sys.stdin.read()
    return 0


if __name__ == "__main__":
    sys.exit(main())
