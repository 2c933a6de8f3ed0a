"""The mail server of the Push example: it publishes a new-mail notification to one device
over NATS JetStream, prints the device's chain result, and waits for the click to come back.
Standard library plus nats-py (the servers' side only; the device runs notifbus).
"""
import argparse
import asyncio
import json
import sys

import nats


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--urls", required=True)
    parser.add_argument("--device", required=True)
    args = parser.parse_args()
    nc = await nats.connect(servers=args.urls.split(","))
    js = nc.jetstream(timeout=10)
    out = f"NOTIFBUS_{args.device}_OUT"
    results = await js.pull_subscribe(f"notifbus.{args.device}.result", stream=out)
    clicks = await js.pull_subscribe(f"notifbus.{args.device}.event.didReceive", stream=out)

    notification = {"notification": {"identifier": "mail-42", "source": "remote", "content": {
        "title": "Ana Lima", "subtitle": "Lunch on Friday?", "body": "Are you free at noon?",
        "categoryIdentifier": "MESSAGE", "userInfo": {"emailId": "e-42"}}}}
    ack = await js.publish(f"notifbus.{args.device}.post.willPresent", json.dumps(notification).encode(),
                           headers={"Nats-Msg-Id": "push-mail-42"})
    print(f"pushed mail e-42 to device {args.device} (stream {ack.stream}, seq {ack.seq})", flush=True)

    msg = (await results.fetch(1, timeout=30))[0]
    await msg.ack()
    result = json.loads(msg.data)["result"]
    print(f"the device's chain: {result['outcome']} by {result['by']}, presentation {result['value']}", flush=True)

    msg = (await clicks.fetch(1, timeout=30))[0]
    await msg.ack()
    click = json.loads(msg.data)
    email = click["notification"]["content"]["userInfo"]["emailId"]
    print(f"click from device {args.device}: {click['actionIdentifier']} on {email}; marking {email} as read", flush=True)
    await nc.close()
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
