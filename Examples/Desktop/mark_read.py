"""The mail app's read-state service, in Python: it observes didReceive before the native
host and handles only dismissals (the user closed a mail notification), marking the mail
as read; every other response goes on to the host.

    python3 mark_read.py [--priority N]   (default 5: before the native host at 10)
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "Clients" / "python" / "src"))

import notifbus  # noqa: E402

DISMISS = "com.apple.UNNotificationDismissActionIdentifier"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--priority", type=int, default=5)
    args = parser.parse_args()
    with notifbus.connect(name="mail-read-state") as bus:

        def on_response(event):
            if event.payload.get("actionIdentifier") != DISMISS:
                return notifbus.NEXT
            email = event.payload["notification"]["content"].get("userInfo", {}).get("emailId")
            print(f"dismissed {event.payload['notification']['identifier']}: marked email {email} as read", flush=True)
            return notifbus.Complete({"markedRead": email})

        bus.add_observer("didReceive", on_response, priority=args.priority, key="mail-read-state")
        print(f"observing didReceive at priority {args.priority}: dismissals mark mail as read", flush=True)
        # Until SIGTERM, or until the broker goes away.
        while bus.connected:
            time.sleep(0.5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
