#!/usr/bin/env python3
"""Load: 5,000 connections open at the same time, each saying hello, subscribing and
posting, then all disconnecting; and `--max-clients` enforcement.

The connections are driven by a few `load.py --driver` children with non-blocking
sockets and a selector. The controller raises RLIMIT_NOFILE before it starts the broker
(which inherits the limit) and the drivers. Phases, each bounded:

  1. every driver connects its share; the controller waits until all are connected;
  2. each connection sends hello, subscribe(["load.<n>"]) and post("load.<n>"), answers
     its own event with complete, and waits for the post's reply (outcome completed);
  3. with all of them still open, `status` must list every client and observer;
  4. all disconnect; the broker's descriptors must return to the baseline.

The rounds repeat (`--rounds`, default 3) on the same broker: its RSS after the last
round must not exceed that after the first by more than 4 MiB (a per-connection leak).

Then a broker with `--max-clients 100` gets 150 connections: exactly 100 are served,
50 get `too_many_clients` (id null) and are closed, and a freed place is reused.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import selectors
import socket
import struct
import subprocess
import sys
import time
from typing import Any, Dict, List

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stresslib as sl  # noqa: E402

PHASE_LIMIT = 60.0


# MARK: driver


class Link:
    __slots__ = ("sock", "n", "out", "inbuf", "done", "ok", "error")

    def __init__(self, sock: socket.socket, n: int) -> None:
        self.sock = sock
        self.n = n
        self.out = bytearray()
        self.inbuf = bytearray()
        self.done = False
        self.ok = False
        self.error = ""


def say(text: str) -> None:
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def driver(path: str, first: int, count: int) -> int:
    """Connects `count` sockets, then on "go" runs the exchange, then on "close" closes."""
    links: List[Link] = []
    started = time.monotonic()
    for i in range(count):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(20)
        s.connect(path)
        s.setblocking(False)
        links.append(Link(s, first + i))
    say(f"connected {time.monotonic() - started:.3f}")
    if sys.stdin.readline().strip() != "go":
        return 1
    started = time.monotonic()
    sel = selectors.DefaultSelector()
    for link in links:
        name = f"load.{link.n}"
        link.out += sl.encode({"op": "hello", "id": 1, "protocol": 1, "name": f"load-{link.n}"})
        link.out += sl.encode({"op": "subscribe", "id": 2, "events": [name]})
        link.out += sl.encode({"op": "post", "id": 3, "name": name, "payload": {"n": link.n}})
        sel.register(link.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, link)
    remaining = len(links)
    deadline = time.monotonic() + PHASE_LIMIT
    while remaining and time.monotonic() < deadline:
        for key, mask in sel.select(timeout=1.0):
            link: Link = key.data
            if mask & selectors.EVENT_WRITE and link.out:
                try:
                    sent = link.sock.send(link.out)
                    del link.out[:sent]
                except BlockingIOError:
                    pass
                if not link.out:
                    sel.modify(link.sock, selectors.EVENT_READ, link)
            if not mask & selectors.EVENT_READ:
                continue
            try:
                data = link.sock.recv(65536)
            except BlockingIOError:
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                link.error = link.error or "closed by the broker"
                link.done = True
                remaining -= 1
                sel.unregister(link.sock)
                continue
            link.inbuf += data
            while len(link.inbuf) >= 4:
                size = struct.unpack(">I", link.inbuf[:4])[0]
                if len(link.inbuf) < 4 + size:
                    break
                frame = json.loads(bytes(link.inbuf[4 : 4 + size]))
                del link.inbuf[: 4 + size]
                op = frame.get("op")
                if op == "event":
                    link.out += sl.encode({"op": "complete", "event": frame["event"], "value": link.n})
                    sel.modify(link.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, link)
                elif op == "reply" and frame.get("id") in (1, 2):
                    if "result" not in frame:
                        link.error = f"reply {frame}"
                elif op == "reply" and frame.get("id") == 3:
                    r = frame.get("result") or {}
                    link.ok = not link.error and r.get("outcome") == "completed" and r.get("value") == link.n
                    if not link.ok:
                        link.error = link.error or f"post reply {frame}"
                    link.done = True
                    remaining -= 1
                    sel.unregister(link.sock)
                    break
                else:
                    link.error = f"unexpected {frame}"
    elapsed = time.monotonic() - started
    failures = [link.error or "no reply in time" for link in links if not link.ok]
    say(
        "done "
        + json.dumps(
            {
                "seconds": round(elapsed, 3),
                "ok": len(links) - len(failures),
                "failed": len(failures),
                "examples": failures[:3],
            }
        )
    )
    if sys.stdin.readline().strip() != "close":
        return 1
    for link in links:
        link.sock.close()
    say("closed")
    return 0


# MARK: controller


class Driver:
    def __init__(self, path: str, first: int, count: int) -> None:
        self.proc = sl.track(
            subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--driver", path, str(first), str(count)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
        )

    def line(self, timeout: float) -> str:
        """The driver's next line of output, waited for at most `timeout` seconds."""
        import select

        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise sl.Timeout("driver did not answer in time")
        return self.proc.stdout.readline().strip()

    def tell(self, word: str) -> None:
        self.proc.stdin.write(word + "\n")
        self.proc.stdin.flush()


def raise_fd_limit(want: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, want)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def one_round(
    checks: sl.Checks, broker: sl.Broker, total: int, drivers: int, fds_before: int, label: str
) -> Dict[str, Any]:
    """Connect all, exchange, check status, disconnect all; returns the round's figures."""
    figures: Dict[str, Any] = {}
    share = total // drivers
    t0 = time.monotonic()
    fleet = [Driver(broker.socket, i * share, share if i < drivers - 1 else total - i * share) for i in range(drivers)]
    try:
        for d in fleet:
            d.line(PHASE_LIMIT)  # "connected"
        figures["connect_s"] = round(time.monotonic() - t0, 3)  # connect() done; the broker may still accept
        t1 = time.monotonic()
        for d in fleet:
            d.tell("go")
        reports = [json.loads(d.line(PHASE_LIMIT + 5).split(" ", 1)[1]) for d in fleet]
        figures["exchange_s"] = round(time.monotonic() - t1, 3)
        ok = sum(r["ok"] for r in reports)
        checks.check(
            f"{label}: {total} connections did hello, subscribe, post (completed by their own observer)",
            ok == total,
            f"{ok} ok; {[e for r in reports for e in r['examples']][:3]}",
        )
        with sl.Conn(broker.socket, timeout=30) as c:
            c.hello("load-check")
            status = sl.full_status(c, timeout=30)
            figures["fds_connected"] = broker.fds()
        clients, observers = len(status["clients"]), len(status["observers"])
        checks.check(
            f"{label}: all {total} open at once (status lists them)",
            clients == total + 1 and observers == total,
            f"{clients} clients (with the checker), {observers} observers, "
            f"{figures['fds_connected']} broker fds while connected",
        )
        figures["counters"] = status["counters"]
        t2 = time.monotonic()
        for d in fleet:
            d.tell("close")
        for d in fleet:
            d.line(PHASE_LIMIT)  # "closed"
        fds_after = broker.wait_fds(fds_before, 15.0)
        figures["disconnect_s"] = round(time.monotonic() - t2, 3)
        figures["total_s"] = round(time.monotonic() - t0, 3)
        checks.check(
            f"{label}: broker fds back to the baseline after all disconnect",
            fds_after == fds_before,
            f"before {fds_before}, after {fds_after}",
        )
        for d in fleet:
            d.proc.wait(timeout=10)
    except (sl.Timeout, sl.Closed, OSError, ValueError, IndexError) as exc:
        checks.check(f"{label}: phases finished in time", False, repr(exc))
    time.sleep(0.3)
    figures["rss_end_kib"] = broker.rss_kib() if broker.alive() else 0
    return figures


def concurrent_connections(
    checks: sl.Checks, binary: str, folder: str, total: int, drivers: int, rounds: int
) -> List[Dict[str, Any]]:
    broker = sl.Broker(binary, folder, ["--max-clients", str(total + 1000)]).start()
    time.sleep(0.2)
    fds_before = broker.fds()
    rss_start = broker.rss_kib()
    sampler = sl.RSSSampler(broker.pid, 0.05)
    results = []
    for r in range(1, rounds + 1):
        figures = one_round(checks, broker, total, drivers, fds_before, f"round {r}")
        figures["rss_start_kib"] = rss_start
        results.append(figures)
    peak = max(sampler.stop(), broker.hwm_kib() if broker.alive() else 0)
    for figures in results:
        figures["peak_rss_kib"] = peak
    # About 1.5 KiB of broker state per connection (records, buffers, a libevent event),
    # rounded up to 16 KiB each, plus the start-up footprint: far above what it needs,
    # far below what a per-connection leak of the 256 KiB read buffer would cost.
    bound = rss_start + total * 16
    checks.check("peak RSS bounded", peak <= bound, f"{sl.mib(peak)} <= {sl.mib(bound)}")
    if rounds >= 3:
        # The first round warms the allocator up; after that, the same work must not
        # leave more behind: 4 MiB over two rounds of 5,000 connections is 400 bytes each.
        growth = results[-1]["rss_end_kib"] - results[0]["rss_end_kib"]
        checks.check(
            "no growth from round to round (a per-connection leak)",
            growth <= 4096,
            f"RSS after each round: {[sl.mib(f['rss_end_kib']) for f in results]}",
        )
    rc = broker.terminate()
    checks.check("broker exits 0 on SIGTERM", rc == 0, f"exit status {rc}")
    return results


def max_clients(checks: sl.Checks, binary: str, folder: str, limit: int = 100, tries: int = 150) -> None:
    broker = sl.Broker(binary, folder, ["--max-clients", str(limit)], log_name="broker-max.log").start()
    conns = [sl.Conn(broker.socket, timeout=5) for _ in range(tries)]
    served, refused, other = [], [], []
    for c in conns:
        try:
            c.send({"op": "hello", "id": 1, "protocol": 1})
        except OSError:
            pass  # a refused peer may already be closed
    for i, c in enumerate(conns):
        try:
            frame = c.recv(5)
        except (sl.Closed, sl.Timeout) as exc:
            other.append((i, repr(exc)))
            continue
        if "result" in frame and frame.get("id") == 1:
            served.append(i)
        elif sl.error_code(frame) == "too_many_clients" and frame.get("id") is None:
            refused.append((i, c.expect_eof(3)))
        else:
            other.append((i, frame))
    checks.check(
        f"--max-clients {limit}: exactly {limit} of {tries} served",
        len(served) == limit and len(refused) == tries - limit and not other,
        f"{len(served)} served, {len(refused)} too_many_clients, other {other[:3]}",
    )
    checks.check("refused connections are closed after the error frame", all(eof for _i, eof in refused))
    checks.check("the served ones are the first to connect", served == list(range(limit)), f"{served[:3]}...")
    # A freed place is reused at once.
    conns[served[0]].close() if served else None
    time.sleep(0.2)
    with sl.Conn(broker.socket) as c:
        reply = c.hello()
        checks.check("a place freed by a disconnect is served again", "result" in reply, str(reply))
        with sl.Conn(broker.socket) as extra:
            try:
                frame = extra.recv(3)
            except (sl.Closed, sl.Timeout) as exc:
                frame = {"exception": repr(exc)}
            checks.check("and the next one is refused again", sl.error_code(frame) == "too_many_clients", str(frame))
    for c in conns:
        c.close()
    rc = broker.terminate()
    checks.check("max-clients broker exits 0 on SIGTERM", rc == 0, f"exit status {rc}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connections", type=int, default=5000)
    parser.add_argument("--drivers", type=int, default=4, help="driver processes (default 4)")
    parser.add_argument("--rounds", type=int, default=3, help="connect/disconnect rounds on one broker (default 3)")
    parser.add_argument("--driver", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        return driver(args.driver[0], int(args.driver[1]), int(args.driver[2]))
    sl.install_signal_cleanup()
    limit = raise_fd_limit(args.connections + 1000)
    checks = sl.Checks("load")
    if limit < args.connections + 100:
        checks.check("RLIMIT_NOFILE allows the connections", False, f"limit {limit}")
        return checks.report()
    folder = sl.fresh_folder("nb-load-")
    binary = sl.snapshot_binary(folder)
    print(f"load: {args.connections} connections from {args.drivers} drivers (RLIMIT_NOFILE {limit})", flush=True)
    results = concurrent_connections(checks, binary, folder, args.connections, args.drivers, args.rounds)
    max_clients(checks, binary, folder)
    print()
    print(
        f"{'round':<8}{'connect s':>11}{'exchange s':>12}{'disconnect s':>14}{'total s':>10}{'fds open':>10}"
        f"{'RSS after':>12}"
    )
    for i, f in enumerate(results, 1):
        print(
            f"{i:<8}{f.get('connect_s')!s:>11}{f.get('exchange_s')!s:>12}{f.get('disconnect_s')!s:>14}"
            f"{f.get('total_s')!s:>10}{f.get('fds_connected')!s:>10}{sl.mib(f.get('rss_end_kib', 0)):>12}"
        )
    if results:
        print(f"broker RSS at start {sl.mib(results[0]['rss_start_kib'])}, peak {sl.mib(results[0]['peak_rss_kib'])}")
        print(f"broker counters after round 1: {results[0].get('counters')}")
    return sl.finish_run(checks, folder, binary)


if __name__ == "__main__":
    sys.exit(main())
