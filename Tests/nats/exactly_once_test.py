"""The NATS bridge's exactly once, end to end, against a real 3-node nats-server cluster and a
real broker with --state-dir, in the ways it has been broken or could be:

  oversized      posts whose broker frame passes maxFrame (a 1,048,556-byte body and a 5 MB
                 one) among others, and 400 kB of `1e9` numbers, which must reach the
                 observer as written: the large ones dead-lettered, every other applied once;
  disk-full      the broker's disk full under a group of 5 posts, a put, 5 posts: refused
                 `storage_failed` for a while, then each applied once when space comes back;
  refused-kills  600 posts refused while the disk is full and the bridge SIGKILLed 3 times;
  restart        a bridge SIGKILLed with 272 messages in hand, --ack-wait 10m: its successor
                 applies them without waiting out AckWait (bounded by 60 s here);
  stress         2,000 posts through a 3 ms observer, 10 bridge SIGKILLs at random moments,
                 2 nats-server SIGKILLs, the broker's disk filling and freeing, and one
                 oversized post.

Each has its own device, broker and bridge. Each checks effects, results and dead letters,
never times; it prints the times it measures. The disk-full parts need root (a small tmpfs)
and are skipped otherwise. scripts/test.d/56-nats.sh starts the cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import json
import os
import random
import signal
import statistics
import sys
import time

import nats

import notifbus

from natslib import FAILURES, Process, RawObserver, SmallDisk, check, publish, read_subject, retried, wait_until


class Device:
    """One device: a broker (state on `disk` when given), a bridge, a raw observer of `mail`."""

    def __init__(
        self,
        ctx: "Context",
        name: str,
        ack_wait: str = "5s",
        delay: float = 0.0,
        disk: SmallDisk | None = None,
        keep=lambda raw: False,
    ) -> None:
        self.name = name
        self.folder = os.path.join(ctx.work, name)
        os.makedirs(self.folder, exist_ok=True)
        self.socket = os.path.join(self.folder, "bus.sock")
        state = os.path.join(disk.path if disk else self.folder, "broker-state")
        self.broker = Process(
            [ctx.notifbus, "broker", "--socket", self.socket, "--state-dir", state, "--call-timeout", "1s"],
            os.path.join(self.folder, "broker.log"),
        )
        extra = [flag.replace("{folder}", self.folder) for flag in ctx.bridge_flags]
        self.bridge = Process(
            [
                ctx.notifbus,
                "bridge",
                "nats",
                "--url",
                ctx.urls,
                "--device",
                name,
                "--socket",
                self.socket,
                "--layout",
                "per-device",
                "--create-stream",
                "--replicas",
                "3",
                "--ack-wait",
                ack_wait,
            ]
            + extra,
            os.path.join(self.folder, "bridge.log"),
        )
        self.delay = delay
        self.keep = keep
        self.observer: RawObserver | None = None
        self.stream = f"NOTIFBUS_{name}"
        self.out = self.stream + "_OUT"

    def subject(self, kind: str, name: str = "") -> str:
        """`notifbus.<device>.<kind>.<name>`, or `notifbus.<device>.<kind>` without a name."""
        return f"notifbus.{self.name}.{kind}" + (f".{name}" if name else "")

    async def start(self) -> None:
        self.broker.start()
        await wait_until(lambda: os.path.exists(self.socket), 10)
        self.observer = RawObserver(self.socket, "mail", self.delay, self.keep)
        await wait_until(self.observer.ready.is_set, 10)
        await self.start_bridge()

    async def start_bridge(self) -> None:
        self.bridge.start()
        await wait_until(lambda: "bridging device" in self.bridge.log_text(), 60)

    def stop(self) -> None:
        if self.observer:
            self.observer.stop()
        self.bridge.stop()
        self.broker.stop()

    def failed(self) -> None:
        print(f"--- {self.name}: bridge log (tail)\n" + "\n".join(self.bridge.log_text().splitlines()[-30:]))
        print(f"--- {self.name}: broker log (tail)\n" + "\n".join(self.broker.log_text().splitlines()[-10:]))


class Context:
    def __init__(self, args) -> None:
        self.notifbus = os.path.join(args.bin, "notifbus")
        self.urls = args.urls
        self.work = args.work
        self.nats_dir = args.nats_dir
        self.nodes = {name: int(pid) for name, pid in (item.split("=") for item in args.node_pids.split(","))}
        self.bridge_flags: list[str] = args.bridge_flag
        self.restarted: list[Process] = []
        self.js = None

    async def kill_node(self, name: str) -> None:
        """SIGKILLs node `name` and starts it again two seconds later."""
        try:
            os.kill(self.nodes[name], signal.SIGKILL)
        except ProcessLookupError:
            pass
        await asyncio.sleep(2)
        node = Process(["nats-server", "-c", f"{self.nats_dir}/{name}/server.conf"], f"{self.nats_dir}/{name}/log")
        node.start()
        self.nodes[name] = node.pid
        self.restarted.append(node)


def fill(disk: SmallDisk, d: Device) -> int:
    """Fills the broker's disk, then puts to a slot of its own until the broker refuses even
    the smallest with `storage_failed`: the journal's last page has no room left either."""
    disk.fill()
    puts = 0
    with notifbus.connect(socket=d.socket, reconnect=False, timeout=5) as probe:
        # Smaller and smaller records, down to the smallest a put makes.
        for size in (200, 20, 1):
            while True:
                try:
                    probe.put("t", "f" * size)
                    puts += 1
                except notifbus.BrokerError as error:
                    if error.code != "storage_failed":
                        raise
                    break
                if puts > 100_000:
                    raise RuntimeError("the broker never refused a put on a full disk")
    return puts


@contextlib.asynccontextmanager
async def running(d: Device, disk: SmallDisk | None = None):
    """The device started, and stopped at the end (its logs shown if a check failed), its
    small disk unmounted."""
    try:
        await d.start()
        yield d
    finally:
        if FAILURES:
            d.failed()
        d.stop()
        if disk:
            disk.unmount()


async def check_results(ctx: Context, d: Device, want: int, prefix: str, bound: float = 60) -> int:
    """Reads the device's results: one per post, each the post's own. Returns the result_lost count."""
    results = await read_subject(ctx.js, d.out, d.subject("result"), want, bound, settle=1)
    per_id, bodies, lost = results_by_id(results)
    wrong = real(bodies, prefix)
    check(
        len(per_id) == want and all(c == 1 for c in per_id.values()) and not wrong and lost == 0,
        f"one real result per post ({len(results)} results for {len(per_id)} ids, {len(wrong)} not the post's own, {lost} result_lost)",
    )
    return lost


def results_by_id(results: list) -> tuple[collections.Counter, list, int]:
    per_id = collections.Counter(m.headers.get("Notifbus-Msg-Id") for m in results)
    bodies = [json.loads(m.data) for m in results]
    lost = sum(1 for b in bodies if b.get("error", {}).get("code") == "result_lost")
    return per_id, bodies, lost


def real(bodies: list, prefix: str) -> list:
    """The results that are not the post's own: an error, or another post's value."""
    return [
        b
        for b in bodies
        if "result" not in b
        or b["result"].get("outcome") != "completed"
        or b["result"]["value"]["shown"] != int(b["msgId"][len(prefix) :])
    ]


async def oversized(ctx: Context) -> None:
    d = Device(ctx, "ov", keep=lambda raw: b'"nums"' in raw)
    async with running(d):
        big = b'{"n":100,"pad":"' + b"x" * (1_048_556 - 18) + b'"}'
        huge = b'{"n":102,"pad":"' + b"y" * (5 * 1024 * 1024 - 18) + b'"}'
        nums = b'{"n":101,"nums":[' + b",".join([b"1e9"] * 100_000) + b"]}"
        check(len(big) == 1_048_556, f"the large post's body is 1,048,556 bytes ({len(big)})")
        for i in range(5):
            await publish(ctx.js, d.subject("post", "mail"), json.dumps({"n": i}).encode(), f"o{i}")
        await publish(ctx.js, d.subject("post", "mail"), big, "big")
        await publish(ctx.js, d.subject("post", "mail"), huge, "huge")
        await publish(ctx.js, d.subject("post", "mail"), nums, "o101")
        for i in range(5, 10):
            await publish(ctx.js, d.subject("post", "mail"), json.dumps({"n": i}).encode(), f"o{i}")
        wanted = set(range(10)) | {101}
        done = await wait_until(lambda: wanted <= set(d.observer.counts()), 60)
        await asyncio.sleep(1.5)
        counts = d.observer.counts()
        check(
            done and all(counts.get(n) == 1 for n in wanted) and 100 not in counts and 102 not in counts,
            f"every post after the oversized ones is applied, each once ({ {n: counts.get(n) for n in sorted(wanted)} })",
        )
        dead = await read_subject(ctx.js, d.out, d.subject("dead"), 2, 30, settle=1)
        shape = sorted((m.headers.get("Notifbus-Msg-Id"), m.headers.get("Notifbus-Reason"), len(m.data)) for m in dead)
        check(
            shape == [("big", "too_large", len(big)), ("huge", "too_large", len(huge))],
            f"the two posts over the broker's maxFrame are dead-lettered too_large with their bodies ({shape})",
        )
        kept = d.observer.kept
        check(
            len(kept) == 1 and b"[1e9,1e9," in kept[0] and b"1000000000" not in kept[0],
            "400 kB of 1e9 reach the observer as written, not re-encoded",
        )
        results = await read_subject(ctx.js, d.out, d.subject("result"), 11, 30, settle=1)
        per_id, bodies, lost = results_by_id(results)
        check(
            set(per_id) == {f"o{n}" for n in wanted}
            and all(c == 1 for c in per_id.values())
            and not real(bodies, "o")
            and lost == 0,
            f"one real result for each applied post ({len(results)} results, {lost} result_lost)",
        )


async def disk_full(ctx: Context) -> None:
    disk = SmallDisk(os.path.join(ctx.work, "sf-disk"), "2m")
    if not disk.mounted:
        print("skipped: disk-full (cannot mount a small tmpfs; needs root)")
        return
    d = Device(ctx, "sf", disk=disk)
    async with running(d, disk):
        # The streams first, then the 11 messages, then the bridge: it fetches them as one
        # batch and writes them as one group, the put in the middle.
        d.bridge.stop()
        fill(disk, d)
        for i in range(5):
            await publish(ctx.js, d.subject("post", "mail"), json.dumps({"n": i}).encode(), f"f{i}")
        await publish(ctx.js, d.subject("put", "launchx"), b'{"v":1}', "put1")
        for i in range(5, 10):
            await publish(ctx.js, d.subject("post", "mail"), json.dumps({"n": i}).encode(), f"f{i}")
        await d.start_bridge()
        await asyncio.sleep(4)
        during = d.observer.counts()
        check(all(c == 1 for c in during.values()), f"while the disk is full nothing is applied twice ({during})")
        check("for now" in d.bridge.log_text(), "the broker's refusals were sent again after a pause (bridge log)")
        disk.free()
        with notifbus.connect(socket=d.socket, reconnect=False, timeout=5) as probe:
            done = await wait_until(lambda: len(d.observer.counts()) == 10 and probe.peek("launchx") == {"v": 1}, 60)
            await asyncio.sleep(1.5)
            counts = d.observer.counts()
            check(
                done and counts == {n: 1 for n in range(10)} and probe.peek("launchx") == {"v": 1},
                f"once space came back, the 10 posts and the put took effect once each ({counts})",
            )
        await check_results(ctx, d, 10, "f")


async def refused_kills(ctx: Context) -> None:
    disk = SmallDisk(os.path.join(ctx.work, "rc-disk"), "2m")
    if not disk.mounted:
        print("skipped: refused-kills (cannot mount a small tmpfs; needs root)")
        return
    d = Device(ctx, "rc", disk=disk, delay=0.005)
    async with running(d, disk):
        fill(disk, d)
        await asyncio.gather(
            *[publish(ctx.js, d.subject("post", "mail"), json.dumps({"n": i}).encode(), f"r{i}") for i in range(600)]
        )
        for _ in range(3):
            await asyncio.sleep(0.7)
            d.bridge.kill()
            d.bridge.start()
        await asyncio.sleep(1)
        disk.free()
        done = await wait_until(lambda: len(d.observer.counts()) == 600, 120)
        await asyncio.sleep(1.5)
        counts = d.observer.counts()
        twice = sorted(n for n, c in counts.items() if c != 1)
        check(
            done and len(counts) == 600 and not twice,
            f"600 posts while the broker's disk was full, through 3 bridge SIGKILLs: each applied once ({len(counts)} distinct, twice: {twice[:10]})",
        )
        await check_results(ctx, d, 600, "r")


async def quiet(observer: RawObserver, still: float, bound: float) -> bool:
    """Waits (bounded) until the observer has seen nothing new for `still` seconds."""
    deadline = time.monotonic() + bound
    last, since = observer.count(), time.monotonic()
    while time.monotonic() < deadline:
        await asyncio.sleep(0.1)
        if observer.count() != last:
            last, since = observer.count(), time.monotonic()
        elif time.monotonic() - since >= still:
            return True
    return False


async def consumer_window(ctx: Context, d: Device) -> tuple[int, int]:
    info = await retried(lambda: ctx.js.consumer_info(d.stream, f"notifbus-bridge-{d.name}"))
    return info.ack_floor.stream_seq, info.delivered.stream_seq


async def restart(ctx: Context) -> None:
    d = Device(ctx, "aw", ack_wait="10m", delay=0.02)
    async with running(d):
        # More than the bridge has at the broker at once (128), so that it holds the rest.
        acks = await asyncio.gather(
            *[publish(ctx.js, d.subject("post", "mail"), json.dumps({"n": i}).encode(), f"a{i}") for i in range(400)]
        )
        sequence = {i: ack.seq for i, ack in enumerate(acks)}
        await wait_until(lambda: d.observer.count() >= 10, 60)
        d.bridge.kill()
        # The posts the bridge had already written to the broker still run; once they have,
        # whatever the observer sees comes through the next bridge.
        await quiet(d.observer, 1.0, 60)
        floor, delivered = await consumer_window(ctx, d)
        held = {n for n, s in sequence.items() if floor < s <= delivered} - set(d.observer.counts())
        started = time.monotonic()
        d.bridge.start()
        done = await wait_until(lambda: d.observer.count() == 400, 60)
        await asyncio.sleep(1)
        counts = d.observer.counts()
        check(
            done and len(held) > 0 and counts == {n: 1 for n in range(400)},
            f"a bridge SIGKILLed holding {len(held)} messages not yet applied, with --ack-wait 10m: its successor applies them "
            f"and the rest, each once ({len(counts)} distinct)",
        )
        with d.observer.lock:
            after = [t - started for t, n in d.observer.times if t > started and n in held]
        if after:
            print(f"figure: bridge restart to the first applied redelivery: {min(after) * 1000:.0f} ms", flush=True)


async def stress(ctx: Context, seed: int) -> None:
    rng = random.Random(seed)
    print(f"stress: seed {seed}", flush=True)
    disk = SmallDisk(os.path.join(ctx.work, "st-disk"), "16m")
    d = Device(ctx, "st", ack_wait="2s", delay=0.003, disk=disk if disk.mounted else None)
    restarts: list[float] = []
    async with running(d, disk):
        big = b'{"n":-1,"pad":"' + b"z" * (1_048_556 - 17) + b'"}'
        bodies = [(json.dumps({"n": i}).encode(), f"s{i}") for i in range(2000)]
        bodies.insert(1000, (big, "big"))
        publisher = asyncio.ensure_future(
            asyncio.gather(*[publish(ctx.js, d.subject("post", "mail"), b, i) for b, i in bodies])
        )
        node_kills = set(rng.sample(range(10), 2))
        began = time.monotonic()
        for k in range(10):
            await asyncio.sleep(rng.uniform(0.3, 1.5))
            if k == 3 and disk.mounted:
                fill(disk, d)
                print("stress: the broker's disk is full", flush=True)
            if k == 6 and disk.mounted:
                disk.free()
                print("stress: the broker's disk has room again", flush=True)
            d.bridge.kill()
            await asyncio.sleep(rng.uniform(0, 0.3))
            restarts.append(time.monotonic())
            d.bridge.start()
            print(
                f"stress: {time.monotonic() - began:.1f} s: bridge restarted, {d.observer.count()} posts applied",
                flush=True,
            )
            if k in node_kills:
                info = await retried(lambda: ctx.js.stream_info(d.stream))
                leader = info.cluster.leader if info.cluster and info.cluster.leader else "n1"
                print(
                    f"stress: SIGKILL of nats-server {leader}, the stream's leader, after {d.observer.count()} posts",
                    flush=True,
                )
                await ctx.kill_node(leader)
            print(f"stress: bridge SIGKILL {k + 1} of 10 after {d.observer.count()} posts", flush=True)
        disk.free()
        await asyncio.wait_for(publisher, 180)
        done = await wait_until(lambda: d.observer.count() >= 2000, 300)
        print(f"stress: {time.monotonic() - began:.1f} s: {d.observer.count()} posts applied", flush=True)
        await asyncio.sleep(2)
        counts = d.observer.counts()
        twice = sorted(n for n, c in counts.items() if c != 1)
        check(
            done and len(counts) == 2000 and not twice and -1 not in counts,
            f"2,000 posts through 10 bridge SIGKILLs, 2 node SIGKILLs and a full disk: each applied once "
            f"({len(counts)} distinct, more than once: {twice[:10]})",
        )
        results = await read_subject(ctx.js, d.out, d.subject("result"), 2000, 180)
        per_id, result_bodies, lost = results_by_id(results)
        wrong = real(result_bodies, "s")
        check(
            len(per_id) == 2000 and all(c == 1 for c in per_id.values()) and not wrong,
            f"one result per post, each the post's own ({len(results)} results, {len(wrong)} not real)",
        )
        print(
            f"figure: result_lost among the stress run's results: {lost} of {len(results)} ({100 * lost / max(len(results), 1):.1f}%)",
            flush=True,
        )
        check(lost == 0, f"no result_lost ({lost})")
        dead = await read_subject(ctx.js, d.out, d.subject("dead"), 1, 30, settle=1)
        check(
            [(m.headers.get("Notifbus-Msg-Id"), m.headers.get("Notifbus-Reason")) for m in dead]
            == [("big", "too_large")],
            "the oversized post is dead-lettered too_large, once",
        )
        with d.observer.lock:
            times = [t for t, _ in d.observer.times]
        firsts = [min(t for t in times if t > r) - r for r in restarts if any(t > r for t in times)]
        if firsts:
            print(
                "figure: bridge restart to the next applied post: "
                + ", ".join(f"{f * 1000:.0f}" for f in firsts)
                + f" ms (median {statistics.median(firsts) * 1000:.0f} ms)",
                flush=True,
            )


SCENARIOS = {"oversized": oversized, "disk-full": disk_full, "refused-kills": refused_kills, "restart": restart}


async def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="the folder of the notifbus binaries")
    parser.add_argument("--urls", required=True)
    parser.add_argument("--nats-dir", required=True, help="the cluster's folder (nN/server.conf)")
    parser.add_argument("--node-pids", required=True, help="n1=PID,n2=PID,n3=PID")
    parser.add_argument("--work", required=True)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("-k", default="", help="run only the scenarios whose name holds this")
    parser.add_argument(
        "--bridge-flag",
        action="append",
        default=[],
        help="a flag more for the bridge ({folder} is the device's folder), to run these against other builds",
    )
    args = parser.parse_args()
    ctx = Context(args)

    async def quiet(error):  # connection errors while nodes are killed are expected here
        pass

    nc = await nats.connect(
        servers=args.urls.split(","), max_reconnect_attempts=-1, reconnect_time_wait=0.2, error_cb=quiet
    )
    ctx.js = nc.jetstream(timeout=5)
    try:
        for name, scenario in SCENARIOS.items():
            if args.k in name:
                print(f"== {name}", flush=True)
                await scenario(ctx)
        if args.k in "stress":
            print("== stress", flush=True)
            await stress(ctx, args.seed if args.seed is not None else random.randrange(1 << 32))
    finally:
        await nc.close()
        for node in ctx.restarted:
            node.stop()
    print(f"{len(FAILURES)} failure(s)" if FAILURES else "all exactly-once checks passed", flush=True)
    return 1 if FAILURES else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
