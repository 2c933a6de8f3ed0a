"""End-to-end test of `notifbus bridge nats` against a real 3-node nats-server cluster.

It plays the servers (nats-py) and the device's local apps (the notifbus Python client) at
once, and runs the bridge itself so that it can SIGKILL and restart it. It asserts effects
and counts only, never times. scripts/test.d/56-nats.sh starts the cluster and the broker.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time

import nats
from nats.js.api import StreamConfig

import notifbus

from natslib import FAILURES, Process, check, publish, read_subject, retried, wait_until

DEVICE = "dev1"
STREAM = "NOTIFBUS_dev1"
OUT = STREAM + "_OUT"
POSTS = 1000


class Device:
    """The device's local apps: a mail observer that counts every post it sees, a click
    observer, and the handlers of the `mail.actions` channel."""

    def __init__(self, socket: str) -> None:
        self.bus = notifbus.connect(socket=socket, name="test-device")
        self.lock = threading.Lock()
        self.seen: collections.Counter[int] = collections.Counter()
        self.foreign: list = []
        self.bus.add_observer("mail", self.on_mail, priority=10)
        self.bus.add_observer("didReceive", lambda event: notifbus.Complete({"opened": True}), priority=10)
        channel = self.bus.method_channel("mail.actions")
        channel.set_method_call_handler(lambda method, arguments: {"archived": arguments["id"]}, "archive")
        channel.set_method_call_handler(self.refuse, "refuse")
        channel.set_method_call_handler(lambda method, arguments: time.sleep(5), "hang")

    def on_mail(self, event):
        n = event.payload.get("n") if isinstance(event.payload, dict) else None
        with self.lock:
            if isinstance(n, int) and 0 <= n < POSTS:
                self.seen[n] += 1
            else:
                self.foreign.append(event.payload)
        return notifbus.Complete({"shown": n})

    @staticmethod
    def refuse(method, arguments):
        raise notifbus.MethodCallError("denied", "not your mailbox", {"owner": "bob"})

    def distinct(self) -> int:
        with self.lock:
            return len(self.seen)


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--socket", required=True)
    parser.add_argument("--urls", required=True)
    parser.add_argument("--bridge", required=True, help="the bridge's command line, as JSON")
    parser.add_argument("--bridge-log", required=True)
    parser.add_argument("--node-pids", required=True, help="n1=PID,n2=PID,n3=PID")
    parser.add_argument("--nats-dir", required=True, help="the cluster's folder (nN/server.conf)")
    parser.add_argument("--broker", required=True, help="the broker's command line, as JSON")
    args = parser.parse_args()
    pids = dict(item.split("=") for item in args.node_pids.split(","))

    async def quiet(error):  # connection errors while nodes are killed are expected here
        pass

    nc = await nats.connect(
        servers=args.urls.split(","), max_reconnect_attempts=-1, reconnect_time_wait=0.2, error_cb=quiet
    )
    js = nc.jetstream(timeout=5)
    # The inbound stream, made here with one subject form the bridge does not know (take.>),
    # as an operator's stream might be; the bridge creates the outbound one (--create-stream).
    await js.add_stream(
        StreamConfig(
            name=STREAM,
            num_replicas=3,
            subjects=[f"notifbus.{DEVICE}.post.>", f"notifbus.{DEVICE}.put.>", f"notifbus.{DEVICE}.take.>"],
        )
    )
    broker = Process(json.loads(args.broker), args.bridge_log + ".broker")
    broker.start()
    await wait_until(lambda: os.path.exists(args.socket), 10)
    device = Device(args.socket)
    bridge = Process(json.loads(args.bridge), args.bridge_log)
    bridge.start()
    restarted: list[subprocess.Popen] = []
    try:
        await crash_run(js, device, bridge, pids)
        await puts(js, device)
        await invokes(nc)
        await export(js, device)
        await malformed(js, device)
        device = await broker_outage(js, device, broker, bridge, args.socket)
        restarted = await nats_outage(js, device, pids, args.nats_dir)
    finally:
        bridge.stop()
        broker.stop()
        await nc.close()
        for p in restarted:
            p.terminate()
            p.wait(10)
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all NATS bridge checks passed", flush=True)
    return 1 if FAILURES else 0


async def crash_run(js, device: Device, bridge: Process, pids: dict) -> None:
    """1,000 posts while the stream's leader node and the bridge are SIGKILLed once each."""
    publisher = asyncio.ensure_future(
        asyncio.gather(
            *[publish(js, f"notifbus.{DEVICE}.post.mail", json.dumps({"n": i}).encode(), f"m{i}") for i in range(POSTS)]
        )
    )
    await wait_until(lambda: device.distinct() >= 200, 120)
    info = await retried(lambda: js.stream_info(STREAM))
    leader = info.cluster.leader if info.cluster and info.cluster.leader else "n1"
    os.kill(int(pids[leader]), signal.SIGKILL)
    print(f"SIGKILLed NATS node {leader}, the stream's leader, after {device.distinct()} posts", flush=True)
    await wait_until(lambda: device.distinct() >= 500, 120)
    bridge.kill()
    print(f"SIGKILLed the bridge after {device.distinct()} posts; starting it again", flush=True)
    await asyncio.sleep(0.5)
    bridge.start()
    await asyncio.wait_for(publisher, 180)
    await wait_until(lambda: device.distinct() >= POSTS, 180)
    results = await read_subject(js, OUT, f"notifbus.{DEVICE}.result", POSTS, 180)
    await asyncio.sleep(1)
    with device.lock:
        counts = dict(device.seen)
        foreign = list(device.foreign)
    twice = [n for n, c in counts.items() if c != 1]
    check(
        len(counts) == POSTS and not twice,
        f"every one of {POSTS} posts reached the observer exactly once "
        f"(distinct {len(counts)}, seen more than once: {twice[:10]})",
    )
    check(not foreign, f"the observer saw no other mail posts ({foreign[:3]})")
    per_id = collections.Counter(m.headers.get("Notifbus-Msg-Id") for m in results)
    lost = sum(1 for m in results if json.loads(m.data).get("error", {}).get("code") == "result_lost")
    check(
        len(per_id) == POSTS
        and all(c == 1 for c in per_id.values())
        and set(per_id) == {f"m{i}" for i in range(POSTS)},
        f"one result per message id: {len(results)} results for {len(per_id)} ids",
    )
    check(lost == 0, f"every result is the post's own: none is result_lost ({lost})")
    good = [json.loads(m.data) for m in results if "result" in json.loads(m.data)]
    check(
        all(
            r["result"]["outcome"] == "completed" and r["result"]["value"]["shown"] == int(r["msgId"][1:]) for r in good
        ),
        f"each result carries its own post's chain result ({len(good)} with a result, {lost} result_lost)",
    )


async def puts(js, device: Device) -> None:
    await publish(js, f"notifbus.{DEVICE}.put.launch2", b'{"emailId":"e-7"}', "p1")
    ok = await wait_until(lambda: device.bus.peek("launch2") == {"emailId": "e-7"}, 30)
    check(ok, "a put from NATS fills the slot")
    check(device.bus.take("launch2") == {"emailId": "e-7"}, "the slot is taken once")
    await publish(js, f"notifbus.{DEVICE}.put.launch2", b'{"emailId":"e-7"}', "p1")
    await asyncio.sleep(3)
    check(device.bus.peek("launch2") is None, "the same put again (same Nats-Msg-Id) does not fill it again")


async def invokes(nc) -> None:
    async def call(method: str, body: bytes, headers=None) -> dict:
        reply = await nc.request(f"notifbus.{DEVICE}.invoke.mail.actions.{method}", body, timeout=15, headers=headers)
        return json.loads(reply.data)

    check(
        await call("archive", b'{"id":"e-1"}') == {"result": {"archived": "e-1"}}, "invoke returns the handler's result"
    )
    check(
        await call("refuse", b"{}")
        == {"error": {"code": "denied", "message": "not your mailbox", "details": {"owner": "bob"}}},
        "invoke returns the handler's error with code, message and details",
    )
    missing = await call("forward", b"{}")
    check(
        missing.get("error", {}).get("code") == "not_implemented",
        f"invoke of an unhandled method: not_implemented ({missing})",
    )
    hung = await call("hang", b"{}")
    check(hung.get("error", {}).get("code") == "timeout", f"invoke of a handler that does not answer: timeout ({hung})")
    bad = await call("archive", b"{oops")
    check(bad.get("error", {}).get("code") == "bad_json", f"invoke with arguments that are not JSON: bad_json ({bad})")


async def export(js, device: Device) -> None:
    click = {
        "actionIdentifier": "com.apple.UNNotificationDefaultActionIdentifier",
        "notification": {"identifier": "mail-42", "content": {"title": "New mail", "userInfo": {"emailId": "e-42"}}},
    }
    result = device.bus.post("didReceive", click)
    check(result.outcome == "completed", "the local click is handled on the device")
    events = await read_subject(js, OUT, f"notifbus.{DEVICE}.event.didReceive", 1, 30, settle=1)
    check(
        len(events) == 1 and json.loads(events[0].data) == click and events[0].headers.get("Nats-Msg-Id"),
        f"--export didReceive: the click reaches NATS once, with a Nats-Msg-Id ({len(events)} events)",
    )


async def malformed(js, device: Device) -> None:
    cases = [
        (f"notifbus.{DEVICE}.post.mail", b'{"n": -1', "bad1", "bad_json"),
        (f"notifbus.{DEVICE}.post.mail", b'{"n": -2}', None, "no_msg_id"),
        (f"notifbus.{DEVICE}.take.launch", b'{"n": -3}', "bad3", "unknown_subject"),
        (f"notifbus.{DEVICE}.post.mail", b'{"n": -4}', "i" * 300, "long_msg_id"),
        (f"notifbus.{DEVICE}.put.launch3", b"", "bad5", "bad_json"),
    ]
    for subject, body, msg_id, _ in cases:
        await publish(js, subject, body, msg_id)
    dead = await read_subject(js, OUT, f"notifbus.{DEVICE}.dead", len(cases), 30)
    reasons = sorted(m.headers.get("Notifbus-Reason") for m in dead)
    check(
        reasons == sorted(c[3] for c in cases),
        f"malformed inbound messages are dead-lettered with their reasons: {reasons}",
    )
    check(
        all(m.headers.get("Notifbus-Subject") and m.headers.get("Notifbus-Detail") for m in dead),
        "each dead letter names the original subject and says why",
    )
    await asyncio.sleep(1)
    with device.lock:
        foreign = list(device.foreign)
    check(not foreign, f"none of them reached the bus ({foreign})")
    check(device.bus.peek("launch3") is None, "the refused put left its slot empty")


def device_registered(socket: str) -> bool:
    """Whether the device's observers of `mail` and `didReceive` are back on the broker."""
    try:
        with notifbus.connect(socket=socket, reconnect=False, timeout=2) as probe:
            names = {name for o in probe.status()["observers"] for name in o["events"]}
    except (OSError, notifbus.NotifbusError):
        return False
    return {"mail", "didReceive"} <= names


async def broker_outage(js, device: Device, broker: Process, bridge: Process, socket: str) -> Device:
    """The broker SIGKILLed: the bridge stops acking and waits; once the broker is back (same
    --state-dir) and the device's client has reconnected, every post sent meanwhile takes
    effect once."""
    broker.kill()
    for i in range(50):
        await publish(js, f"notifbus.{DEVICE}.post.mail", json.dumps({"n": POSTS + i}).encode(), f"o{i}")
    await asyncio.sleep(2)
    info = await retried(lambda: js.consumer_info(STREAM, f"notifbus-bridge-{DEVICE}"))
    check(
        info.num_ack_pending + info.num_pending == 50,
        f"with the broker down the bridge acks nothing (pending {info.num_pending}, unacked {info.num_ack_pending})",
    )
    # The bridge is held still while the device's apps come back, so that none of the posts
    # runs before their observer is there (the bridge itself would go on at once).
    # The device's client reconnects by itself and makes its observers and handlers again.
    bridge.process.send_signal(signal.SIGSTOP)
    broker.start()
    await wait_until(lambda: os.path.exists(socket), 10)
    await wait_until(lambda: device_registered(socket), 20)
    bridge.process.send_signal(signal.SIGCONT)
    outage_ids = {POSTS + i for i in range(50)}
    await wait_until(lambda: len([1 for m in device.foreign if m.get("n") in outage_ids]) >= 50, 60)
    await asyncio.sleep(1)
    with device.lock:
        seen = collections.Counter(m.get("n") for m in device.foreign)
    check(
        set(seen) == outage_ids and all(c == 1 for c in seen.values()),
        f"after the broker restart the 50 posts of the outage took effect once each ({len(seen)} distinct)",
    )
    with device.lock:
        device.foreign.clear()
    return device


async def nats_outage(js, device: Device, pids: dict, nats_dir: str) -> list:
    """Every NATS node SIGKILLed: the local bus goes on; restarted, the bridge catches up."""
    for pid in pids.values():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except ProcessLookupError:
            pass
    await asyncio.sleep(1)
    start = time.monotonic()
    local = device.bus.post("local.only", {"while": "nats is down"})
    check(
        local.outcome == "unhandled",
        f"the local bus works while NATS is down (a post answered in {int((time.monotonic() - start) * 1000)} ms)",
    )
    nodes = [
        subprocess.Popen(
            ["nats-server", "-c", f"{nats_dir}/n{i}/server.conf"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        for i in (1, 2, 3)
    ]
    for i in range(20):
        await publish(js, f"notifbus.{DEVICE}.post.mail", json.dumps({"n": 5000 + i}).encode(), f"z{i}")
    await wait_until(lambda: len(device.foreign) >= 20, 90)
    await asyncio.sleep(1)
    with device.lock:
        seen = collections.Counter(m.get("n") for m in device.foreign)
    check(
        set(seen) == {5000 + i for i in range(20)} and all(c == 1 for c in seen.values()),
        f"after NATS came back the bridge reconnected and applied the new posts once each ({len(seen)} distinct)",
    )
    return nodes


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
