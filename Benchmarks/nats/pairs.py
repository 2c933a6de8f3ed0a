#!/usr/bin/env python3
"""pairs.py - N real devices (a broker with --state-dir and `notifbus bridge nats --layout
shared`) on a 3-node cluster on loopback: what a real pair costs beside what it costs the
cluster, and the time to push one post to every device and collect every result.

    swift build && source scripts/lib/venv.sh
    python3 Benchmarks/nats/pairs.py --bin "$(swift build --show-bin-path)" --pairs 20

Prints the resident memory and CPU (over `--idle-s`) of the brokers, the bridges and the
three nats-servers, idle, per device; then the push. Everything lives in a temporary folder
and is stopped on exit. Uses the cluster of scale.py.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import time

import nats

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from scale import PAGE, TICK, Cluster, quiet  # noqa: E402


def rss(pid: int) -> int:
    with open("/proc/%d/statm" % pid) as f:
        return int(f.read().split()[1]) * PAGE


def cpu(pid: int) -> float:
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="the folder of notifbus and notifbus-bridge")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--idle-s", type=float, default=10)
    ap.add_argument("--port", type=int, default=37222)
    ap.add_argument("--bridge-flag", action="append", default=[], help="one more flag for every bridge")
    args = ap.parse_args()
    root = tempfile.mkdtemp(prefix="notifbus-pairs-")
    cluster = Cluster(os.path.join(root, "nats"), args.port, args.port + 1000)
    procs = {"broker": [], "bridge": []}
    logs = []
    try:
        cluster.start()
        await cluster.wait_ready(60)
        for i in range(args.pairs):
            dev = "p%02d" % i
            folder = os.path.join(root, dev)
            os.makedirs(folder)
            sock = os.path.join(folder, "bus.sock")
            log = open(os.path.join(folder, "log"), "ab")
            logs.append(log)
            procs["broker"].append(
                subprocess.Popen(
                    [
                        os.path.join(args.bin, "notifbus"),
                        "broker",
                        "--socket",
                        sock,
                        "--state-dir",
                        os.path.join(folder, "state"),
                    ],
                    stdout=log,
                    stderr=log,
                )
            )
            deadline = time.monotonic() + 10
            while not os.path.exists(sock) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            procs["bridge"].append(
                subprocess.Popen(
                    [
                        os.path.join(args.bin, "notifbus-bridge"),
                        "nats",
                        "--url",
                        ",".join(cluster.urls),
                        "--device",
                        dev,
                        "--socket",
                        sock,
                        "--layout",
                        "shared",
                        "--create-stream",
                        "--replicas",
                        "3",
                    ]
                    + args.bridge_flag,
                    stdout=log,
                    stderr=log,
                )
            )
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            started = sum(
                b"bridging device" in open(os.path.join(root, "p%02d" % i, "log"), "rb").read()
                for i in range(args.pairs)
            )
            if started == args.pairs:
                break
            await asyncio.sleep(0.2)
        else:
            print("pairs: %d of %d bridges started in 120 s" % (started, args.pairs))
            return 1
        await asyncio.sleep(3)
        groups = {
            "brokers": [p.pid for p in procs["broker"]],
            "bridges": [p.pid for p in procs["bridge"]],
            "nats-servers": [p.pid for p in cluster.procs],
        }
        c0 = {k: sum(cpu(p) for p in v) for k, v in groups.items()}
        await asyncio.sleep(args.idle_s)
        print("| %d devices, idle | RSS MB | per device | CPU ms/s | per device |" % args.pairs)
        print("| --- | --- | --- | --- | --- |")
        for k, v in groups.items():
            mem = sum(rss(p) for p in v) / 2**20
            used = (sum(cpu(p) for p in v) - c0[k]) * 1000 / args.idle_s
            print("| %s | %.0f | %.1f MB | %.1f | %.2f |" % (k, mem, mem / args.pairs, used, used / args.pairs))

        nc = await nats.connect(cluster.urls, error_cb=quiet)
        js = nc.jetstream(timeout=10)
        seen = set()
        done = asyncio.Event()

        async def on_result(msg) -> None:
            seen.add(msg.subject)
            if len(seen) == args.pairs:
                done.set()

        await nc.subscribe("notifbus.*.result", cb=on_result)
        t = time.monotonic()
        await asyncio.gather(
            *(
                js.publish("notifbus.p%02d.in.post.mail" % i, b'{"n":1}', headers={"Nats-Msg-Id": "push-%d" % i})
                for i in range(args.pairs)
            )
        )
        await asyncio.wait_for(done.wait(), 60)
        print("\npush to all %d devices, every result back: %.0f ms" % (args.pairs, (time.monotonic() - t) * 1000))
        await nc.close()
        return 0
    finally:
        for p in procs["bridge"] + procs["broker"]:
            p.terminate()
        for p in procs["bridge"] + procs["broker"]:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        for log in logs:
            log.close()
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
