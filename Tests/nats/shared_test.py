"""The NATS bridge's shared layout (Protocol/NATS.md §2) end to end, against a real 3-node
nats-server cluster and real brokers with --state-dir: two devices, each a broker and a
bridge with `--layout shared`, on one inbound stream NOTIFBUS and one outbound NOTIFBUS_OUT.

  round trip    posts and a put to each device take effect on that device only, once; each
                post's result comes back on its device's result subject; once applied and
                acked, nothing of theirs is left in the work-queue stream
  limit         with device s2's bridge stopped, 28 posts to one of its subjects under
                --max-per-subject 25: the first 25 are stored, the last 3 refused to the
                publisher with JetStream's error 10077; a put to another subject of s2 and
                posts to s1 go through meanwhile; s2's consumer holds every stored one
  offline       s2's bridge started again: it applies the 25 kept posts and the put, each
                once, publishes their results, and the subject takes posts again; a SIGKILL of
                the bridge and a start afterwards apply nothing again
  servers       `notifbus push --layout shared` and notifbus_server's Device(layout="shared"):
                post, put and invoke with --wait / wait=True, each giving s1's real result;
                the same msg id sent again once the work queue removed the first copy gives
                the first outcome (read back from NOTIFBUS_OUT), and a put sent again changes
                nothing; the per-device subjects reach no stream here

A subject is filled to its limit only while its device is offline and every node's copy of
the stream agrees: nats-server 2.9.10 applies the limit on each copy against what that copy
holds, and in a work queue a copy drops an acked message only once it has applied the ack, so
a post to a full subject whose device is draining it can be stored by some copies and
refused by others, which then part ways (Protocol/NATS.md §7). The round trip's 20 posts per
device stay under the limit for the same reason.

Every wait is bounded; checks are on effects, results and stream state, never on times.
scripts/test.d/56-nats.sh starts the cluster.
"""

from __future__ import annotations

import asyncio
import collections
import json
import os
import subprocess
import sys

import nats
from nats.js.errors import APIError
from notifbus_server import Device as ServerDevice

import notifbus

from natslib import (
    FAILURES,
    Process,
    RawObserver,
    bin_urls_work_args,
    check,
    jetstream_state,
    publish,
    read_subject,
    retried,
    stream_copies,
    wait_until,
)

#: --max-per-subject: above the round trip's 20 posts to one subject of a device, so that
#: the limit is reached only in the limit part, with the device offline.
LIMIT = 25
#: Posts past the limit in the limit part, each refused to the publisher.
OVER = 3


class Device:
    """A broker with --state-dir, a raw observer of `mail`, and a bridge in the shared layout."""

    def __init__(self, args, name: str) -> None:
        self.name = name
        self.folder = os.path.join(args.work, name)
        os.makedirs(self.folder, exist_ok=True)
        self.socket = os.path.join(self.folder, "bus.sock")
        notifbus_bin = os.path.join(args.bin, "notifbus")
        self.broker = Process(
            [
                notifbus_bin,
                "broker",
                "--socket",
                self.socket,
                "--state-dir",
                os.path.join(self.folder, "state"),
                "--call-timeout",
                "1s",
            ],
            os.path.join(self.folder, "broker.log"),
        )
        self.bridge = Process(
            [
                notifbus_bin,
                "bridge",
                "nats",
                "--url",
                args.urls,
                "--device",
                name,
                "--socket",
                self.socket,
                "--layout",
                "shared",
                "--create-stream",
                "--replicas",
                "3",
                "--ack-wait",
                "3s",
                "--max-per-subject",
                str(LIMIT),
            ],
            os.path.join(self.folder, "bridge.log"),
        )
        self.observer: RawObserver | None = None

    def post(self, event: str) -> str:
        return f"notifbus.{self.name}.in.post.{event}"

    async def start(self) -> None:
        self.broker.start()
        await wait_until(lambda: os.path.exists(self.socket), 10)
        self.observer = RawObserver(self.socket, "mail")
        await wait_until(self.observer.ready.is_set, 10)
        await self.start_bridge()

    async def start_bridge(self) -> None:
        self.bridge.start()
        check(
            await wait_until(lambda: "bridging device" in self.bridge.log_text(), 60),
            f"{self.name}: the bridge started",
        )

    def stop(self) -> None:
        if self.observer:
            self.observer.stop()
        self.bridge.stop()
        self.broker.stop()

    def show_logs(self) -> None:
        print(f"--- {self.name}: bridge log (tail)\n" + "\n".join(self.bridge.log_text().splitlines()[-30:]))
        print(f"--- {self.name}: broker log (tail)\n" + "\n".join(self.broker.log_text().splitlines()[-10:]))


async def results(js, d: Device, want: int, ids: set) -> None:
    """One result per post of `ids`, each carrying its own post's chain value."""
    got = await read_subject(js, "NOTIFBUS_OUT", f"notifbus.{d.name}.result", want, 60, settle=1)
    per_id = collections.Counter(m.headers.get("Notifbus-Msg-Id") for m in got)
    bodies = [json.loads(m.data) for m in got]
    own = all(
        b.get("result", {}).get("outcome") == "completed"
        and b["result"]["value"]["shown"] == int(b["msgId"].rsplit("-", 1)[1])
        for b in bodies
    )
    check(
        set(per_id) == ids and all(c == 1 for c in per_id.values()) and own,
        f"{d.name}: one result per post, each the post's own ({len(got)} results for {len(per_id)} ids of {len(ids)})",
    )


async def explained(js, condition: bool, what: str, devices) -> None:
    """`check`, and when it fails, the JetStream state behind it and what the devices' bridges
    logged."""
    check(condition, what)
    if condition:
        return
    subjects = "notifbus.*.in.>" if len(devices) > 1 else f"notifbus.{devices[0].name}.in.>"
    consumers = [f"notifbus-bridge-{d.name}" for d in devices]
    print(await jetstream_state(js, "NOTIFBUS", consumers, subjects), flush=True)
    for d in devices:
        lines = d.bridge.log_text().splitlines()
        print(f"   {d.name}'s bridge logged {len(lines)} lines, the last ones:", flush=True)
        for line in lines[-12:]:
            print("     " + line, flush=True)


async def drained(js, d: Device) -> bool:
    """Nothing of the device is pending or held, and the work-queue stream kept none of it."""
    info = await retried(lambda: js.consumer_info("NOTIFBUS", f"notifbus-bridge-{d.name}"))
    stream = await retried(lambda: js.stream_info("NOTIFBUS", subjects_filter=f"notifbus.{d.name}.>"))
    return info.num_pending == 0 and info.num_ack_pending == 0 and not (stream.state.subjects or {})


async def round_trip(js, s1: Device, s2: Device) -> None:
    for d, base in ((s1, 0), (s2, 100)):
        for n in range(base, base + 20):
            await publish(js, d.post("mail"), json.dumps({"n": n}).encode(), f"{d.name}-{n}")
    await publish(js, f"notifbus.{s1.name}.in.put.launch", b'{"emailId":"e-1"}', "put-1")
    for d, base in ((s1, 0), (s2, 100)):
        want = {n: 1 for n in range(base, base + 20)}
        await wait_until(lambda d=d: d.observer.count() >= 20, 60)
        check(
            d.observer.counts() == want,
            f"{d.name}: its 20 posts applied once each, no other device's "
            f"({len(d.observer.counts())} seen, {sum(d.observer.counts().values())} applications)",
        )
        await results(js, d, 20, {f"{d.name}-{n}" for n in range(base, base + 20)})
    with notifbus.connect(socket=s1.socket, reconnect=False, timeout=5) as bus:
        filled = await wait_until(lambda: bus.peek("launch") == {"emailId": "e-1"}, 30)
        check(filled, "a put on notifbus.s1.in.put.launch fills s1's slot")
    with notifbus.connect(socket=s2.socket, reconnect=False, timeout=5) as bus:
        check(bus.peek("launch") is None, "s2's slot stays empty")
    await explained(
        js,
        await wait_until_async(lambda: drained(js, s1), 30),
        "s1: acked messages are gone from the work-queue stream",
        [s1],
    )


async def copies_agree() -> bool:
    """Every node holds a copy of NOTIFBUS, and all copies hold the same messages: each has
    applied every store and every removal its leader has."""
    copies = await asyncio.to_thread(stream_copies, "NOTIFBUS")
    return None not in copies and len(set(copies)) == 1


async def settled(js, devices) -> bool:
    """The stream and every device's consumer have a leader, and each replica of them is current."""
    infos = [await retried(lambda: js.stream_info("NOTIFBUS"))]
    for d in devices:
        infos.append(await retried(lambda d=d: js.consumer_info("NOTIFBUS", f"notifbus-bridge-{d.name}")))
    return all(
        i.cluster is not None
        and i.cluster.leader
        and all(p.current and not p.offline for p in (i.cluster.replicas or []))
        for i in infos
    )


async def wait_until_async(predicate, bound: float) -> bool:
    deadline = asyncio.get_running_loop().time() + bound
    while asyncio.get_running_loop().time() < deadline:
        if await predicate():
            return True
        await asyncio.sleep(0.2)
    return await predicate()


async def limit_and_offline(js, s1: Device, s2: Device) -> None:
    # The per-subject limit counts what the stream holds: s2's round-trip posts must all be
    # acked (and so removed) first. A bridge stopped with an ack still on its way leaves that
    # message for its next run, as it should, and the limit would count it.
    await explained(
        js,
        await wait_until_async(lambda: drained(js, s2), 30),
        "s2: its acked messages are gone from the work-queue stream before it goes offline",
        [s1, s2],
    )
    s2.bridge.stop()
    # The posts below fill the subject to its limit and past it: only once every copy of the
    # stream has dropped the messages acked so far, so that each copy takes the same ones.
    await explained(
        js,
        await wait_until_async(copies_agree, 30),
        "every node's copy of the stream holds the same messages before s2's subject is filled",
        [s1, s2],
    )
    last = 200 + LIMIT + OVER
    stored, refused, other = [], [], []
    for n in range(200, last):
        try:
            await js.publish(
                s2.post("mail"), json.dumps({"n": n}).encode(), headers={"Nats-Msg-Id": f"s2-{n}"}, timeout=5
            )
            stored.append(n)
        except APIError as error:
            (refused if error.err_code == 10077 else other).append((n, error.err_code, error.description))
    await explained(
        js,
        stored == list(range(200, 200 + LIMIT))
        and [r[0] for r in refused] == list(range(200 + LIMIT, last))
        and not other,
        f"offline s2: the first {LIMIT} posts on one subject stored, the rest refused to the publisher with 10077 "
        f"(stored {stored}, refused {[r[0] for r in refused]}, other {other})",
        [s2],
    )
    if refused:
        print(f"   the publisher's error: {refused[0][2]}", flush=True)
    await publish(js, f"notifbus.{s2.name}.in.put.launch", b'{"emailId":"e-2"}', "put-2")
    for n in range(20, 23):
        await publish(js, s1.post("mail"), json.dumps({"n": n}).encode(), f"s1-{n}")
    ok = await wait_until(lambda: all(s1.observer.counts().get(n) == 1 for n in range(20, 23)), 30)
    check(ok, "s1 goes on meanwhile: its 3 new posts applied once each")
    # The kept posts and the put are the consumer's, unacked: pending, or ack pending when the
    # stopped bridge's last fetch took one. That fetch stays at the consumer's leader until the
    # leader learns that the bridge's connection is gone, and a post stored meanwhile is
    # delivered to it; the next bridge has JetStream deliver it again (Protocol/NATS.md §4).
    # The figures are the consumer leader's view of the stream, not promised current the
    # moment a publish is acknowledged: they are read until they are right, within a bound.
    held = []

    async def holds_all() -> bool:
        info = await retried(lambda: js.consumer_info("NOTIFBUS", "notifbus-bridge-s2"))
        held.append((info.num_pending, info.num_ack_pending))
        return info.num_pending + info.num_ack_pending == LIMIT + 1

    await explained(
        js,
        await wait_until_async(holds_all, 15),
        f"s2's consumer holds the kept posts and the put, unacked ({held[-1][0]} pending, {held[-1][1]} ack pending)",
        [s2],
    )

    await s2.start_bridge()
    kept = range(200, 200 + LIMIT)
    ok = await wait_until(lambda: all(s2.observer.counts().get(n) == 1 for n in kept), 60)
    await asyncio.sleep(2)
    counts = s2.observer.counts()
    check(
        ok and all(counts.get(n) == 1 for n in kept) and not any(n in counts for n in range(200 + LIMIT, last)),
        f"s2 back online: the {LIMIT} kept posts applied once each, the refused ones never "
        f"({ {n: c for n, c in counts.items() if n >= 200} })",
    )
    await results(js, s2, 20 + LIMIT, {f"s2-{n}" for n in list(range(100, 120)) + list(kept)})
    with notifbus.connect(socket=s2.socket, reconnect=False, timeout=5) as bus:
        check(
            await wait_until(lambda: bus.peek("launch") == {"emailId": "e-2"}, 30),
            "s2: the put made while offline fills the slot",
        )
    await explained(
        js,
        await wait_until_async(lambda: drained(js, s2), 30),
        "s2: caught up, nothing of it left in the stream",
        [s2],
    )
    # The subject was full: the next post waits until every copy has dropped the applied ones.
    await explained(
        js,
        await wait_until_async(copies_agree, 30),
        "every node's copy of the stream holds the same messages once s2 caught up",
        [s2],
    )

    ack = await publish(js, s2.post("mail"), json.dumps({"n": last}).encode(), f"s2-{last}")
    check(ack.seq > 0, "the subject takes posts again once its messages are applied")
    check(await wait_until(lambda: s2.observer.counts().get(last) == 1, 30), "and the new post is applied")
    s2.bridge.kill()
    await s2.start_bridge()
    await asyncio.sleep(3)
    check(
        all(c == 1 for n, c in s2.observer.counts().items()),
        "after a SIGKILL and a start of s2's bridge nothing is applied again",
    )


def push(args, device: str, *words: str) -> tuple:
    """Runs `notifbus push --layout shared` for `device`: status, stdout as JSON (None when it
    is not), stderr."""
    command = [
        os.path.join(args.bin, "notifbus"),
        "push",
        "--nats",
        args.urls,
        "--device",
        device,
        "--timeout",
        "30s",
        *words,
    ]
    done = subprocess.run(command, capture_output=True, timeout=60)
    out, err = done.stdout.decode(), done.stderr.decode()
    try:
        return done.returncode, json.loads(out), err
    except ValueError:
        return done.returncode, None, err + out


async def gone_from_queue(js, d: Device) -> bool:
    """Every message of the device was applied, acked and so removed from the work queue."""
    return await wait_until_async(lambda: drained(js, d), 30)


async def servers_side(js, args, s1: Device) -> None:
    run = lambda *words: asyncio.to_thread(push, args, s1.name, "--layout", "shared", *words)  # noqa: E731
    status, out, err = await run("--msg-id", "cli-300", "--wait", "post", "mail", '{"n":300}')
    first = (out or {}).get("result", {})
    check(
        status == 0
        and (out or {}).get("msgId") == "cli-300"
        and first.get("outcome") == "completed"
        and first.get("value") == {"shown": 300},
        f"push --layout shared post --wait: s1's own result ({status} {out} {err})",
    )
    check(s1.observer.counts().get(300) == 1, "s1 ran the pushed post once")
    check(await gone_from_queue(js, s1), "the post is applied and gone from the work queue")
    status, out, err = await run("--msg-id", "cli-300", "post", "mail", '{"n":300}')
    check(
        status == 0 and (out or {}).get("duplicate") is True and out.get("stream") == "NOTIFBUS",
        f"the same --msg-id again: NOTIFBUS calls it a duplicate ({out} {err})",
    )
    status, again, err = await run("--msg-id", "cli-300", "--wait", "post", "mail", '{"n":300}')
    check(
        status == 0 and again is not None and again.get("result") == first,
        f"the same --msg-id with --wait, the first copy gone from the queue: the first result ({again} {err})",
    )

    status, out, err = await run("--msg-id", "cli-put-1", "--wait", "put", "launch", '{"emailId":"e-300"}')
    check(status == 0 and (out or {}).get("applied") is True, f"push --layout shared put --wait: applied ({out} {err})")
    with notifbus.connect(socket=s1.socket, reconnect=False, timeout=5) as bus:
        check(bus.peek("launch") == {"emailId": "e-300"}, "the pushed put is in s1's slot when put --wait returns")
        status, out, err = await run("--msg-id", "cli-put-1", "--wait", "put", "launch", '{"emailId":"e-301"}')
        check(
            status == 0 and (out or {}).get("duplicate") is True and out.get("applied") is True,
            f"the same put --msg-id again: a duplicate, applied already ({out} {err})",
        )
        await asyncio.sleep(1)
        check(bus.peek("launch") == {"emailId": "e-300"}, "and the slot keeps the first put's value")

        channel = bus.method_channel("mail.actions")
        channel.set_method_call_handler(lambda method, arguments: {"archived": arguments["id"], "on": "s1"}, "archive")
        await asyncio.sleep(0.5)
        status, out, err = await run("invoke", "mail.actions", "archive", '{"id":"e-300"}')
        check(
            status == 0 and out == {"result": {"archived": "e-300", "on": "s1"}},
            f"push --layout shared invoke: s1's handler's reply ({out} {err})",
        )

        nc = await nats.connect(servers=args.urls.split(","))
        try:
            device = ServerDevice(nc, s1.name, timeout=30, layout="shared")
            result = await device.post("mail", {"n": 301}, msg_id="lib-301", wait=True)
            check(
                result.get("outcome") == "completed" and result.get("value") == {"shown": 301},
                f"notifbus_server layout=shared post(wait=True): s1's own result ({result})",
            )
            check(await gone_from_queue(js, s1), "the library's post is applied and gone from the work queue")
            stored = await device.post("mail", {"n": 301}, msg_id="lib-301")
            check(
                stored.get("duplicate") is True and stored.get("stream") == "NOTIFBUS",
                f"the same msg_id: a duplicate ({stored})",
            )
            again = await device.post("mail", {"n": 301}, msg_id="lib-301", wait=True)
            check(again == result, f"the same msg_id with wait=True: the first result ({again})")
            applied = await device.put("launch", {"from": "python"}, wait=True)
            check(
                applied.get("applied") is True and bus.peek("launch") == {"from": "python"},
                f"notifbus_server layout=shared put(wait=True): in s1's slot ({applied})",
            )
            reply = await device.invoke("mail.actions", "archive", {"id": "e-301"})
            check(reply == {"archived": "e-301", "on": "s1"}, f"notifbus_server layout=shared invoke ({reply})")
            try:
                ServerDevice(nc, s1.name, layout="flat")
                check(False, "notifbus_server refuses an unknown layout")
            except ValueError as error:
                check("flat" in str(error), f"notifbus_server refuses an unknown layout: {error}")
        finally:
            await nc.close()
    check(
        s1.observer.counts().get(300) == 1 and s1.observer.counts().get(301) == 1,
        "every post sent twice ran once on s1",
    )

    status, out, err = await asyncio.to_thread(push, args, s1.name, "post", "mail", '{"n":302}')
    check(
        status == 1 and "no JetStream stream takes notifbus.s1.post.mail" in err and "--layout" in err,
        f"the per-device subject (push's default layout) reaches no stream on a shared cluster ({err.strip()})",
    )
    status, out, err = await asyncio.to_thread(push, args, s1.name, "--layout", "flat", "post", "mail", "{}")
    check(
        status == 2 and "--layout takes shared or per-device" in err, f"an unknown --layout: status 2 ({err.strip()})"
    )


async def main() -> int:
    args = bin_urls_work_args()

    async def quiet(error):
        pass

    nc = await nats.connect(
        servers=args.urls.split(","), max_reconnect_attempts=-1, reconnect_time_wait=0.2, error_cb=quiet
    )
    js = nc.jetstream(timeout=5)
    s1, s2 = Device(args, "s1"), Device(args, "s2")
    try:
        await s1.start()
        await s2.start()
        info = await retried(lambda: js.stream_info("NOTIFBUS"))
        check(
            str(getattr(info.config.retention, "value", info.config.retention)) == "workqueue"
            and info.config.max_msgs_per_subject == LIMIT
            and str(getattr(info.config.discard, "value", info.config.discard)) == "new"
            and info.config.discard_new_per_subject,
            "the bridge created NOTIFBUS: work queue, max per subject, discard new per subject",
        )
        # The checks start once the elections of a fresh cluster are over: a leader change in
        # the middle of them is stepdown_test.py's subject, and nats-server 2.9.10 can leave
        # acked messages on a replica after one (Protocol/NATS.md §7).
        check(
            await wait_until_async(lambda: settled(js, [s1, s2]), 60),
            "the stream and both devices' consumers have leaders and current replicas",
        )
        print("== round trip", flush=True)
        await round_trip(js, s1, s2)
        print("== limit and offline", flush=True)
        await limit_and_offline(js, s1, s2)
        print("== servers' side", flush=True)
        await servers_side(js, args, s1)
    finally:
        if FAILURES:
            s1.show_logs()
            s2.show_logs()
        s1.stop()
        s2.stop()
        await nc.close()
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all shared-layout checks passed", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
