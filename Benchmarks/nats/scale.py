#!/usr/bin/env python3
"""scale.py - what a device costs a 3-node NATS JetStream cluster, for each of the bridge's
layouts (Protocol/NATS.md §2), with N simulated devices on loopback.

    source scripts/lib/venv.sh
    python3 Benchmarks/nats/scale.py --devices 1000,5000 --layout shared,per-device

Each simulated device does on the wire what `notifbus bridge nats` does: it makes sure of its
streams (per-device layout) and its durable pull consumer (explicit acks, R3 like the
stream), then loops on fetch requests that wait up to `--fetch-ms` (the bridge's 1 s); a
fetched post is answered with a JetStream publish of its result (with `Nats-Msg-Id`,
waiting for the stream's ack) and then acked. The broker is left out: this measures the
cluster, not the device.

Per layout and device count, on a fresh cluster:
  setup     time to create every device's streams and consumer
  idle      the 3 nats-servers' resident memory and CPU with every device waiting in a
            fetch, less the same cluster with no device (CPU over `--idle-s` seconds)
  push-all  one post published to every device, until every result is stored (its publish
            acked) and every inbound message acked
  restart   with one post waiting for every device, all three nodes stopped (SIGTERM) and
            started again: time from the start until every device applied its post

The devices share `--per-conn` of them per NATS connection (a real bridge has one each).
Prints a table; `--json FILE` keeps the rows, `--svg FILE` draws cost per device against the
device count, `--report FILE` prints the table (and draws the chart) of rows kept earlier. Everything lives in a temporary folder; the nodes are stopped on exit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from typing import Dict, List, Optional

import nats
from nats.js.api import AckPolicy, ConsumerConfig, DiscardPolicy, RetentionPolicy, StreamConfig
from nats.js.errors import NotFoundError

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Cluster:
    """Three nats-server nodes with JetStream on 127.0.0.1, each in its own folder."""

    def __init__(self, root: str, client_base: int, route_base: int) -> None:
        self.root = root
        self.ports = [client_base + i for i in range(3)]
        self.procs: List[Optional[subprocess.Popen]] = [None, None, None]
        self.urls = ["nats://127.0.0.1:%d" % p for p in self.ports]
        for i in range(3):
            d = os.path.join(root, "n%d" % (i + 1))
            os.makedirs(os.path.join(d, "js"), exist_ok=True)
            routes = ",".join("nats-route://127.0.0.1:%d" % (route_base + j) for j in range(3) if j != i)
            with open(os.path.join(d, "server.conf"), "w") as f:
                f.write(
                    "server_name: n%d\nhost: 127.0.0.1\nport: %d\nmax_payload: 1MB\n"
                    "max_connections: 100000\n"
                    'jetstream { store_dir: "%s", max_memory_store: 256MB, max_file_store: 20GB }\n'
                    "cluster { name: notifbus-scale, host: 127.0.0.1, port: %d, routes: [%s] }\n"
                    % (i + 1, self.ports[i], os.path.join(d, "js"), route_base + i, routes)
                )

    def start(self) -> None:
        exe = shutil.which("nats-server") or "/usr/sbin/nats-server"
        for i in range(3):
            d = os.path.join(self.root, "n%d" % (i + 1))
            logf = open(os.path.join(d, "log"), "ab")
            self.procs[i] = subprocess.Popen([exe, "-c", os.path.join(d, "server.conf")], stdout=logf, stderr=logf)

    def stop(self, timeout: float = 120) -> None:
        for p in self.procs:
            if p and p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in self.procs:
            if p is None:
                continue
            try:
                p.wait(timeout)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)

    def rss_bytes(self) -> int:
        total = 0
        for p in self.procs:
            with open("/proc/%d/statm" % p.pid) as f:
                total += int(f.read().split()[1]) * PAGE
        return total

    def cpu_seconds(self) -> float:
        total = 0
        for p in self.procs:
            with open("/proc/%d/stat" % p.pid) as f:
                fields = f.read().rsplit(")", 1)[1].split()
            total += int(fields[11]) + int(fields[12])
        return total / TICK

    async def wait_ready(self, deadline_s: float) -> None:
        """Until every node answers and JetStream has a meta leader (account info works)."""
        deadline = time.monotonic() + deadline_s
        for url in self.urls:
            while True:
                try:
                    nc = await nats.connect(url, connect_timeout=1, allow_reconnect=False, error_cb=quiet)
                    try:
                        await nc.jetstream(timeout=2).account_info()
                        break
                    finally:
                        await nc.close()
                except Exception as error:
                    if time.monotonic() > deadline:
                        raise RuntimeError("the cluster did not come up in %.0f s" % deadline_s) from error
                    await asyncio.sleep(0.3)


async def quiet(_error: Exception) -> None:
    pass


async def retry(what: str, call, deadline_s: float = 600):
    """Calls `call()` until it succeeds: JetStream answers 503 or times out while it elects."""
    deadline = time.monotonic() + deadline_s
    pause = 0.05
    while True:
        try:
            return await call()
        except Exception as error:
            if time.monotonic() > deadline:
                raise RuntimeError("%s: %r" % (what, error)) from error
            await asyncio.sleep(pause)
            pause = min(pause * 2, 1.0)


def device_id(i: int) -> str:
    return "d%05d" % i


class Layout:
    """Stream and consumer names and subjects, as the bridge makes them (Protocol/NATS.md §2)."""

    def __init__(self, name: str, replicas: int) -> None:
        self.name = name
        self.replicas = replicas

    def inbound_subject(self, dev: str, event: str) -> str:
        if self.name == "shared":
            return "notifbus.%s.in.post.%s" % (dev, event)
        return "notifbus.%s.post.%s" % (dev, event)

    def stream(self, dev: str) -> str:
        return "NOTIFBUS" if self.name == "shared" else "NOTIFBUS_" + dev

    async def create_shared(self, js) -> None:
        if self.name != "shared":
            return
        await js.add_stream(
            StreamConfig(
                name="NOTIFBUS",
                subjects=["notifbus.*.in.>"],
                retention=RetentionPolicy.WORK_QUEUE,
                discard=DiscardPolicy.NEW,
                discard_new_per_subject=True,
                max_msgs_per_subject=1000,
                max_age=7 * 86400,
                num_replicas=self.replicas,
                duplicate_window=600,
            )
        )
        await js.add_stream(
            StreamConfig(
                name="NOTIFBUS_OUT",
                subjects=["notifbus.*.result", "notifbus.*.dead", "notifbus.*.event.>"],
                max_age=7 * 86400,
                num_replicas=self.replicas,
                duplicate_window=600,
            )
        )

    async def ensure_device(self, js, dev: str) -> None:
        """The bridge's start: streams (per-device, created when missing), then the consumer."""
        if self.name == "per-device":
            for name, subjects in (
                ("NOTIFBUS_" + dev, ["notifbus.%s.post.>" % dev, "notifbus.%s.put.>" % dev]),
                (
                    "NOTIFBUS_%s_OUT" % dev,
                    ["notifbus.%s.result" % dev, "notifbus.%s.dead" % dev, "notifbus.%s.event.>" % dev],
                ),
            ):
                try:
                    await js.stream_info(name)
                except NotFoundError:
                    await js.add_stream(
                        StreamConfig(name=name, subjects=subjects, num_replicas=self.replicas, duplicate_window=600)
                    )
        durable = "notifbus-bridge-" + dev
        try:
            await js.consumer_info(self.stream(dev), durable)
        except NotFoundError:
            config = ConsumerConfig(
                durable_name=durable, ack_policy=AckPolicy.EXPLICIT, ack_wait=30, max_ack_pending=6 * 256
            )
            if self.name == "shared":
                config.filter_subject = "notifbus.%s.in.>" % dev
            await js.add_consumer(self.stream(dev), config)


class Devices:
    """N simulated bridges on a few connections: each loops on fetch requests to its consumer."""

    def __init__(self, layout: Layout, n: int, urls: List[str], per_conn: int, fetch_ms: int) -> None:
        self.layout = layout
        self.n = n
        self.urls = urls
        self.per_conn = per_conn
        self.fetch_ms = fetch_ms
        self.conns: List = []
        self.applied: Dict[str, int] = {}
        self.done = asyncio.Event()
        self.target = 0
        self.finished = 0
        self.running = False
        self.tasks: List[asyncio.Task] = []
        #: Fetch requests sent: the idle load, when the harness keeps up with --fetch-ms.
        self.fetches = 0

    async def connect(self) -> None:
        count = (self.n + self.per_conn - 1) // self.per_conn
        self.conns = []
        for c in range(count):
            nc = await retry(
                "connect",
                lambda c=c: nats.connect(
                    self.urls[c % 3 :] + self.urls[: c % 3],
                    connect_timeout=2,
                    max_reconnect_attempts=-1,
                    reconnect_time_wait=0.25,
                    error_cb=quiet,
                    pending_size=64 * 1024 * 1024,
                ),
            )
            self.conns.append(nc)

    def conn(self, i: int):
        return self.conns[i // self.per_conn]

    async def ensure_all(self, concurrency: int = 64) -> None:
        sem = asyncio.Semaphore(concurrency)

        async def one(i: int) -> None:
            async with sem:
                js = self.conn(i).jetstream(timeout=5)
                await retry("ensure " + device_id(i), lambda: self.layout.ensure_device(js, device_id(i)))

        await asyncio.gather(*(one(i) for i in range(self.n)))

    def start(self) -> None:
        self.running = True
        self.tasks = [asyncio.ensure_future(self.loop(i)) for i in range(self.n)]

    async def stop(self) -> None:
        self.running = False
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for nc in self.conns:
            try:
                await nc.close()
            except Exception:
                pass

    def expect(self, count: int) -> None:
        """Every device is to apply `count` more posts; `done` is set when all have."""
        self.target = count
        self.finished = 0
        self.applied = {}
        self.done = asyncio.Event()

    async def loop(self, i: int) -> None:
        dev = device_id(i)
        nc = self.conn(i)
        js = nc.jetstream(timeout=5)
        stream = self.layout.stream(dev)
        durable = "notifbus-bridge-" + dev
        inbox = nc.new_inbox()
        queue: asyncio.Queue = asyncio.Queue()

        async def deliver(msg) -> None:
            queue.put_nowait(msg)

        sub = await nc.subscribe(inbox, cb=deliver)
        request = json.dumps({"batch": 1, "expires": self.fetch_ms * 1_000_000}).encode()
        subject = "$JS.API.CONSUMER.MSG.NEXT.%s.%s" % (stream, durable)
        try:
            while self.running:
                try:
                    await nc.publish(subject, request, reply=inbox)
                    self.fetches += 1
                except Exception:
                    await asyncio.sleep(0.25)
                    continue
                try:
                    msg = await asyncio.wait_for(queue.get(), self.fetch_ms / 1000 + 2)
                except asyncio.TimeoutError:
                    continue
                if not msg.reply:  # a status (408 request timeout, 404, 409): ask again
                    if msg.headers and msg.headers.get("Status") not in ("408", "404", "409", None):
                        await asyncio.sleep(0.1)
                    continue
                msg_id = (msg.headers or {}).get("Nats-Msg-Id", "")
                body = json.dumps({"msgId": msg_id, "result": {"outcome": "completed"}}).encode()
                await retry(
                    "result " + dev,
                    lambda body=body, msg_id=msg_id: js.publish(
                        "notifbus.%s.result" % dev, body, headers={"Nats-Msg-Id": "result:" + msg_id}
                    ),
                )
                await retry("ack " + dev, lambda reply=msg.reply: nc.request(reply, b"+ACK", timeout=5))
                n = self.applied.get(dev, 0) + 1
                self.applied[dev] = n
                if n == self.target:
                    self.finished += 1
                    if self.finished == self.n:
                        self.done.set()
        finally:
            try:
                await sub.unsubscribe()
            except Exception:
                pass


async def publish_all(urls: List[str], layout: Layout, n: int, tag: str, concurrency: int = 256) -> None:
    """The server's side: one post to every device, each with its Nats-Msg-Id, acked by the stream."""
    nc = await nats.connect(urls, error_cb=quiet, max_reconnect_attempts=-1)
    js = nc.jetstream(timeout=10)
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with sem:
            dev = device_id(i)
            await retry(
                "publish " + dev,
                lambda: js.publish(
                    layout.inbound_subject(dev, "mail"), b'{"n":1}', headers={"Nats-Msg-Id": tag + "-" + dev}
                ),
            )

    await asyncio.gather(*(one(i) for i in range(n)))
    await nc.close()


def available_mb() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) // 1024
    return 1 << 30


async def measure(layout_name: str, n: int, args) -> dict:
    """One layout and device count, stopped when the machine's free memory runs low (the
    machine is shared: the run gives way rather than push others into the OOM killer)."""
    row: dict = {}
    body = asyncio.ensure_future(measure_body(layout_name, n, args, row))
    while not body.done():
        await asyncio.wait([body], timeout=2)
        if not body.done() and available_mb() < args.min_available_mb:
            row["stopped_by"] = "memory: under %d MB available" % args.min_available_mb
            body.cancel()
            await asyncio.gather(body, return_exceptions=True)
    if "stopped_by" in row:
        row["error"] = row["stopped_by"]
        log("%s %d: stopped, %s" % (layout_name, n, row["stopped_by"]))
    return row


async def measure_body(layout_name: str, n: int, args, row: dict) -> None:
    root = tempfile.mkdtemp(prefix="notifbus-scale-", dir=args.work)
    cluster = Cluster(root, args.port, args.port + 1000)
    row.update({"layout": layout_name, "devices": n, "per_conn": args.per_conn, "fetch_ms": args.fetch_ms})
    layout = Layout(layout_name, args.replicas)
    devices: Optional[Devices] = None
    try:
        cluster.start()
        await cluster.wait_ready(60)
        await asyncio.sleep(args.settle_s)
        c0 = cluster.cpu_seconds()
        await asyncio.sleep(args.idle_s)
        base_cpu = (cluster.cpu_seconds() - c0) / args.idle_s
        base_rss = cluster.rss_bytes()
        row["base_rss_mb"] = base_rss / 2**20
        row["base_cpu"] = base_cpu

        nc = await nats.connect(cluster.urls, error_cb=quiet)
        await retry("shared streams", lambda: layout.create_shared(nc.jetstream(timeout=10)))
        await nc.close()
        devices = Devices(layout, n, cluster.urls, args.per_conn, args.fetch_ms)
        await devices.connect()
        t = time.monotonic()
        await devices.ensure_all()
        row["setup_s"] = time.monotonic() - t
        log("%s %d: setup %.1f s" % (layout_name, n, row["setup_s"]))
        devices.start()
        await asyncio.sleep(args.settle_s)
        c0 = cluster.cpu_seconds()
        f0 = devices.fetches
        await asyncio.sleep(args.idle_s)
        cpu = (cluster.cpu_seconds() - c0) / args.idle_s
        row["fetches_per_device_s"] = (devices.fetches - f0) / args.idle_s / n
        rss = cluster.rss_bytes()
        row["rss_mb"] = rss / 2**20
        row["cpu"] = cpu
        row["rss_kb_per_device"] = (rss - base_rss) / 1024 / n
        row["cpu_ms_per_device_s"] = (cpu - base_cpu) * 1000 / n
        log(
            "%s %d: idle rss %.0f MB (+%.1f KB/device), cpu %.2f cores (%.3f ms/s per device), %.2f fetches/s per device"
            % (
                layout_name,
                n,
                rss / 2**20,
                row["rss_kb_per_device"],
                cpu,
                row["cpu_ms_per_device_s"],
                row["fetches_per_device_s"],
            )
        )

        devices.expect(1)
        t = time.monotonic()
        c0 = cluster.cpu_seconds()
        await publish_all(cluster.urls, layout, n, "push")
        row["publish_s"] = time.monotonic() - t
        await asyncio.wait_for(devices.done.wait(), args.timeout_s)
        row["push_all_s"] = time.monotonic() - t
        row["push_cpu_ms_per_device"] = (cluster.cpu_seconds() - c0) * 1000 / n
        log("%s %d: push to all %.1f s (publishing %.1f s)" % (layout_name, n, row["push_all_s"], row["publish_s"]))

        await devices.stop()
        await publish_all(cluster.urls, layout, n, "restart")
        cluster.stop()
        devices = Devices(layout, n, cluster.urls, args.per_conn, args.fetch_ms)
        devices.expect(1)
        t = time.monotonic()
        cluster.start()
        await devices.connect()
        await devices.ensure_all()
        devices.start()
        try:
            await asyncio.wait_for(devices.done.wait(), args.timeout_s)
        except asyncio.TimeoutError:
            row["restart_caught_up"] = devices.finished
            raise RuntimeError(
                "%d of %d devices caught up within %.0f s of the restart" % (devices.finished, n, args.timeout_s)
            ) from None
        row["restart_s"] = time.monotonic() - t
        log("%s %d: caught up after a cluster restart in %.1f s" % (layout_name, n, row["restart_s"]))
    except Exception as error:
        row["error"] = repr(error)[:300]
        log("%s %d: stopped: %r" % (layout_name, n, error))
    finally:
        if devices:
            await asyncio.shield(devices.stop())
        cluster.stop()
        shutil.rmtree(root, ignore_errors=True)


def table(rows: List[dict]) -> str:
    head = (
        "layout",
        "devices",
        "fetch wait s",
        "setup s",
        "idle RSS MB",
        "KB/device",
        "idle CPU",
        "ms CPU/s per device",
        "fetches/s per device",
        "push-all s",
        "restart catch-up s",
        "stopped by",
    )
    lines = ["| " + " | ".join(head) + " |", "| " + " | ".join("---" for _ in head) + " |"]
    for r in rows:

        def f(key, fmt, r=r):
            return fmt % r[key] if key in r else "–"

        lines.append(
            "| "
            + " | ".join(
                (
                    r["layout"],
                    "{:,}".format(r["devices"]),
                    "%g" % (r.get("fetch_ms", 1000) / 1000),
                    f("setup_s", "%.1f"),
                    f("rss_mb", "%.0f"),
                    f("rss_kb_per_device", "%.1f"),
                    f("cpu", "%.2f"),
                    f("cpu_ms_per_device_s", "%.3f"),
                    f("fetches_per_device_s", "%.3g"),
                    f("push_all_s", "%.1f"),
                    f("restart_s", "%.1f"),
                    r.get("error", "").replace("|", "/") or "–",
                )
            )
            + " |"
        )
    return "\n".join(lines)


def short(v: float) -> str:
    return "{:,.0f}".format(v) if v >= 100 else "%.3g" % v


def svg(rows: List[dict]) -> str:
    """Two panels, memory and idle CPU per device against the device count, a line per layout."""

    def series(r: dict) -> str:
        wait = r.get("fetch_ms", 1000)
        return r["layout"] + ("" if wait == 1000 else ", %g s fetches" % (wait / 1000))

    colors = {"shared": "#2f6fb0", "shared, 30 s fetches": "#6aa84f", "per-device": "#d9822b"}
    width, height, pad = 760, 350, 60
    panels = (
        ("rss_kb_per_device", "cluster RSS per idle device, KB"),
        ("cpu_ms_per_device_s", "cluster CPU per idle device, ms per s"),
    )
    out = [
        '<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" '
        'font-size="12"><rect width="100%%" height="100%%" fill="white"/>' % (width, height)
    ]
    counts = sorted({r["devices"] for r in rows})
    pw = (width - 3 * pad) / 2
    for p, (key, title) in enumerate(panels):
        x0 = pad + p * (pw + pad)
        y0, y1 = height - pad - 30, 40
        good = [r for r in rows if key in r]
        top = max([r[key] for r in good] + [1e-9]) * 1.15
        out.append('<text x="%.0f" y="24" font-weight="bold">%s</text>' % (x0, title))
        out.append('<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>' % (x0, y0, x0 + pw, y0))
        out.append('<line x1="%.0f" y1="%.0f" x2="%.0f" y2="%.0f" stroke="black"/>' % (x0, y0, x0, y1))
        for k in range(5):
            v = top * k / 4
            y = y0 - (y0 - y1) * k / 4
            out.append('<text x="%.0f" y="%.0f" text-anchor="end">%s</text>' % (x0 - 4, y + 4, short(v)))

        def xpos(c: int, x0: float = x0) -> float:
            return x0 + pw * (counts.index(c) + 0.5) / len(counts)

        for c in counts:
            out.append('<text x="%.0f" y="%.0f" text-anchor="middle">%s</text>' % (xpos(c), y0 + 16, "{:,}".format(c)))
        out.append('<text x="%.0f" y="%.0f" text-anchor="middle">devices</text>' % (x0 + pw / 2, y0 + 34))
        for li, (name, color) in enumerate(colors.items()):
            pts = sorted((r["devices"], r[key]) for r in good if series(r) == name)
            coords = [(xpos(c), y0 - (y0 - y1) * v / top) for c, v in pts]
            if len(coords) > 1:
                out.append(
                    '<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>'
                    % (color, " ".join("%.1f,%.1f" % xy for xy in coords))
                )
            for (x, y), (_, v) in zip(coords, pts):
                out.append('<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"/>' % (x, y, color))
                out.append('<text x="%.1f" y="%.1f" fill="%s">%s</text>' % (x + 6, y - 5 + 13 * li, color, short(v)))
            if p == 0:
                lx = pad + li * 200
                out.append('<rect x="%.0f" y="%.0f" width="10" height="10" fill="%s"/>' % (lx, height - 22, color))
                out.append('<text x="%.0f" y="%.0f">%s</text>' % (lx + 14, height - 13, name))
    out.append("</svg>")
    return "\n".join(out)


async def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--devices", default="1000,5000", help="device counts, comma-separated")
    ap.add_argument("--layout", default="shared,per-device", help="layouts, comma-separated")
    ap.add_argument("--replicas", type=int, default=3)
    ap.add_argument("--per-conn", type=int, default=10, help="simulated devices per NATS connection")
    ap.add_argument("--fetch-ms", type=int, default=1000, help="how long a fetch waits (the bridge: 1000)")
    ap.add_argument("--idle-s", type=float, default=20, help="CPU is measured over this long")
    ap.add_argument("--settle-s", type=float, default=10, help="pause before measuring idle")
    ap.add_argument("--timeout-s", type=float, default=600, help="bound on push-all and catch-up")
    ap.add_argument("--port", type=int, default=34222, help="client ports PORT..PORT+2, routes PORT+1000..")
    ap.add_argument("--work", default=None, help="folder for the nodes' stores (default: the temp folder)")
    ap.add_argument(
        "--min-available-mb",
        type=int,
        default=4096,
        help="stop a run when the machine's available memory falls below this",
    )
    ap.add_argument("--json", help="append the rows to this file (JSON lines)")
    ap.add_argument("--svg", help="write the chart of cost per device (from --json's rows when given)")
    ap.add_argument("--report", metavar="JSONL", help="measure nothing: print the table of these rows (and --svg)")
    args = ap.parse_args()
    if args.report:
        with open(args.report) as f:
            every = [json.loads(line) for line in f if line.strip()]
        print(table(every))
        if args.svg:
            with open(args.svg, "w") as f:
                f.write(svg(every))
        return 0
    rows = []
    for layout in args.layout.split(","):
        if layout not in ("shared", "per-device"):
            ap.error("--layout takes shared and per-device, not %r" % layout)
        for n in (int(x) for x in args.devices.split(",")):
            row = await measure(layout, n, args)
            rows.append(row)
            if args.json:
                with open(args.json, "a") as f:
                    f.write(json.dumps(row) + "\n")
    print(table(rows))
    if args.svg:
        every = rows
        if args.json:
            with open(args.json) as f:
                every = [json.loads(line) for line in f if line.strip()]
        with open(args.svg, "w") as f:
            f.write(svg(every))
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
