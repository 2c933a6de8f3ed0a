#!/usr/bin/env python3
"""Benchmark: how long after a restarted broker prints its readiness line does a post walk
the whole chain again? 100 observers in 10 Python processes (the blocking client, which
reconnects by itself); the broker is restarted 20 times, alternating SIGTERM and SIGKILL,
and the median, quartiles and maximum are printed. Target: median <= 100 ms.

Prints numbers; asserts nothing. Python 3 standard library only.
Run: python3 Benchmarks/restart.py [--restarts 20] [--processes 10] [--observers 10]
(the broker is --broker-bin, else NOTIFBUS_BIN, else .build/debug/notifbus).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import List, Optional

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "Tests" / "stress"))
import stresslib as sl  # noqa: E402

OBSERVER = r"""
import sys, time, notifbus
socket, count = sys.argv[1], int(sys.argv[2])
bus = notifbus.connect(socket, name="bench-observer", timeout=10)
for i in range(count):
    bus.add_observer("bench", lambda ev: notifbus.NEXT, priority=i)
print("ready", flush=True)
while True:
    time.sleep(1)
"""


def start_broker(binary: str, path: str) -> "tuple[subprocess.Popen, float]":
    """Starts the broker; returns it and the moment its readiness line was read."""
    process = sl.track(
        subprocess.Popen(
            [binary, "broker", "--socket", path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        line = process.stderr.readline()
        if b"listening on" in line:
            return process, time.monotonic()
        if not line:
            break
    raise RuntimeError("broker did not become ready")


def walk_time(path: str, hops: int, since: float, limit: float = 10.0, back: Optional[List[float]] = None) -> float:
    """Posts until one post's trace has `hops` hops; returns seconds since `since`
    (and appends to `back` when `status` first showed every observer). It
    polls `status` (cheap) until the chain looks complete, so that no time goes into
    walking half-made chains, then posts."""
    back_count = len(back) if back is not None else 0
    while time.monotonic() - since < limit:
        try:
            with sl.Conn(path, timeout=5) as conn:
                conn.hello("bench-poster")
                while time.monotonic() - since < limit:
                    status = conn.request("status", timeout=5)["result"]
                    if sum(1 for o in status["observers"] if "bench" in o["events"]) < hops:
                        time.sleep(0.001)
                        continue
                    if back is not None and len(back) == back_count:
                        back.append(time.monotonic() - since)
                    reply = conn.request("post", timeout=5, name="bench")
                    if len(reply.get("result", {}).get("trace", [])) == hops:
                        return time.monotonic() - since
        except (OSError, sl.Closed, sl.Timeout):
            time.sleep(0.001)
    return float("inf")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--restarts", type=int, default=20)
    parser.add_argument("--processes", type=int, default=10)
    parser.add_argument("--observers", type=int, default=10, help="observers per process")
    parser.add_argument("--broker-bin", help="the broker binary (default NOTIFBUS_BIN, else .build/debug/notifbus)")
    args = parser.parse_args()
    if args.broker_bin:
        os.environ["NOTIFBUS_BIN"] = os.path.abspath(args.broker_bin)
    sl.install_signal_cleanup()
    folder = tempfile.mkdtemp(prefix="nb-bench-restart-", dir="/tmp")
    binary = sl.snapshot_binary(folder)
    path = os.path.join(folder, "bus.sock")
    env = dict(os.environ, PYTHONPATH=str(REPO / "Clients" / "python" / "src"))
    broker, _ = start_broker(binary, path)
    observers = [
        sl.track(
            subprocess.Popen(
                [sys.executable, "-c", OBSERVER, path, str(args.observers)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                env=env,
                text=True,
            )
        )
        for _ in range(args.processes)
    ]
    for p in observers:
        assert p.stdout.readline().strip() == "ready"
    hops = args.processes * args.observers
    assert walk_time(path, hops, time.monotonic()) < 10, "the chain is not complete before the first restart"
    times: List[float] = []
    back: List[float] = []
    for n in range(args.restarts):
        broker.send_signal(signal.SIGTERM if n % 2 == 0 else signal.SIGKILL)
        broker.wait(timeout=10)
        broker, ready = start_broker(binary, path)
        times.append(walk_time(path, hops, ready, back=back))
    broker.send_signal(signal.SIGTERM)
    sl.kill_children()
    shutil.rmtree(folder, ignore_errors=True)
    ms = sorted(t * 1000 for t in times)
    q = statistics.quantiles(ms, n=4) if len(ms) >= 2 else [ms[0]] * 3
    print(
        f"restart: {hops} observers in {args.processes} processes, {args.restarts} restarts (SIGTERM/SIGKILL alternating)"
    )
    print(
        f"  readiness line -> post walks the whole chain: median {statistics.median(ms):.1f} ms, "
        f"p25 {q[0]:.1f} ms, p75 {q[2]:.1f} ms, max {ms[-1]:.1f} ms (target: median <= 100 ms)"
    )
    print(
        f"  of which: every observer registered again (status): median {statistics.median(back) * 1000:.1f} ms, "
        f"max {max(back) * 1000:.1f} ms; the rest is the {hops}-hop walk itself"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
