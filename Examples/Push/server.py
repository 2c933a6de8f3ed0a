"""The mail server of the Push example: it posts a new-mail notification to one device over
NATS, prints the device's chain result, and waits for the click to come back. It talks to the
device through notifbus_server (Clients/python-server), the servers' side of Protocol/NATS.md.
"""

import argparse
import asyncio
import sys

import nats
from notifbus_server import Device


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--urls", required=True)
    parser.add_argument("--device", required=True)
    args = parser.parse_args()
    nc = await nats.connect(servers=args.urls.split(","))
    laptop = Device(nc, args.device, timeout=30)
    clicks = await laptop.events("didReceive")

    notification = {
        "notification": {
            "identifier": "mail-42",
            "source": "remote",
            "content": {
                "title": "Ana Lima",
                "subtitle": "Lunch on Friday?",
                "body": "Are you free at noon?",
                "categoryIdentifier": "MESSAGE",
                "userInfo": {"emailId": "e-42"},
            },
        }
    }
    print(f"pushed mail e-42 to device {args.device}; waiting for its chain", flush=True)
    result = await laptop.post("willPresent", notification, msg_id="push-mail-42", wait=True)
    print(f"the device's chain: {result['outcome']} by {result['by']}, presentation {result['value']}", flush=True)

    click = await clicks.next(timeout=30)
    email = click["notification"]["content"]["userInfo"]["emailId"]
    print(
        f"click from device {args.device}: {click['actionIdentifier']} on {email}; marking {email} as read", flush=True
    )
    await nc.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
