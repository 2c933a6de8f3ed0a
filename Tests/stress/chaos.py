#!/usr/bin/env python3
"""Chaos run: one broker, many client processes misbehaving at once, for `--seconds`.

Processes (each a separate `python3 chaos.py --worker ROLE` child, raw sockets):
  50 observers   answer next / complete / stop, some slowly, some hang past the hop timeout
  10 handlers    serve method channels, some slowly (past the call timeout), some with errors
  20 posters     post and invoke, check every reply, sometimes drop the connection mid-flight
   4 garbage     random bytes, bad JSON, oversized and zero length prefixes, no hello, ...
   3 non-readers subscribe and monitor, then never read: the output bound must cut them off
and the controller SIGKILLs observers and handlers at random and starts replacements.

Afterwards it checks: every post and invoke got exactly one answer or lost its connection;
the broker's descriptors are back to the baseline; its peak RSS stayed under a bound; it
is alive, answers ping, holds no leftover state, and exits 0 on SIGTERM.
"""

from __future__ import annotations

import argparse
import heapq
import json
import os
import random
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stresslib as sl  # noqa: E402

EVENT_NAMES = ["chaos.a", "chaos.b", "chaos.c", "willPresent"]
POST_NAMES = EVENT_NAMES + ["chaos.none", "didReceive"]
CHANNELS = ["chaos.ch0", "chaos.ch1", "chaos.ch2"]
METHODS = ["m0", "m1", "m2"]
INVOKE_CHANNELS = CHANNELS + ["chaos.ch3"]  # ch3 never has a handler: not_implemented
KEYS = ["k0", "k1", "k2", "k3"]
PRESENT_OPTIONS = ["badge", "sound", "list", "banner", "alert"]
HOPS = {"next", "complete", "stop", "gone", "timeout", "invalid", "skipped"}
NOTIFICATION = {"identifier": "n-chaos", "source": "local", "content": {"title": "Chaos", "body": "b", "badge": 1}}

OBSERVER_PROFILES = ["next"] * 15 + ["complete"] * 8 + ["stop"] * 5 + ["mixed"] * 10 + ["slow"] * 7 + ["hang"] * 5
HANDLER_PROFILES = ["fast"] * 4 + ["slow"] * 2 + ["sluggish"] * 2 + ["erroring"] * 2
DEFAULT_COUNTS = {"observer": 50, "handler": 10, "poster": 20, "garbage": 4, "nonreader": 3}
BROKER_ARGS = ["--hop-timeout", "300ms", "--call-timeout", "1s", "--max-clients", "2000"]
#: Posters wait this long after the deadline for the replies still owed to them.
DRAIN_SECONDS = 20.0


# MARK: worker plumbing


class Peer:
    """A worker's connection: frames in through a select loop, timers, blocking sends."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(5)
        self.sock.connect(path)
        self.buf = bytearray()
        self.timers: List[tuple] = []
        self.seq = 0
        self.next_id = 1

    def send(self, message: Dict[str, Any]) -> None:
        self.sock.settimeout(5)
        self.sock.sendall(sl.encode(message))

    def later(self, delay: float, fn: Callable[[], None]) -> None:
        self.seq += 1
        heapq.heappush(self.timers, (time.monotonic() + delay, self.seq, fn))

    def pump(
        self, until: float, on_frame: Callable[[Dict[str, Any]], None], stop: Optional[Callable[[], bool]] = None
    ) -> None:
        """Runs until wall-clock `until` or `stop()`; raises sl.Closed at EOF."""
        while time.time() < until and not (stop and stop()):
            now = time.monotonic()
            while self.timers and self.timers[0][0] <= now:
                heapq.heappop(self.timers)[2]()
            wait = until - time.time()
            if self.timers:
                wait = min(wait, self.timers[0][0] - time.monotonic())
            ready, _, _ = select.select([self.sock], [], [], max(0.0, min(wait, 0.5)))
            if not ready:
                continue
            try:
                data = self.sock.recv(1 << 16)
            except (BlockingIOError, socket.timeout):
                continue
            except ConnectionResetError:
                data = b""
            if not data:
                raise sl.Closed("broker closed the connection")
            self.buf += data
            while len(self.buf) >= 4:
                n = struct.unpack(">I", self.buf[:4])[0]
                if len(self.buf) < 4 + n:
                    break
                frame = json.loads(bytes(self.buf[4 : 4 + n]))
                del self.buf[: 4 + n]
                on_frame(frame)

    def request(
        self, message: Dict[str, Any], on_frame: Callable[[Dict[str, Any]], None], timeout: float = 10.0
    ) -> Dict[str, Any]:
        rid = self.next_id
        self.next_id += 1
        self.send({**message, "id": rid})
        box: List[Dict[str, Any]] = []

        def catch(frame: Dict[str, Any]) -> None:
            if frame.get("op") == "reply" and frame.get("id") == rid and not box:
                box.append(frame)
            else:
                on_frame(frame)

        self.pump(time.time() + timeout, catch, stop=lambda: bool(box))
        if not box:
            raise sl.Timeout(f"no reply to {message['op']}")
        return box[0]


def emit(stats: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(stats) + "\n")
    sys.stdout.flush()


# MARK: observer


def observer_worker(path: str, profile: str, until: float, rng: random.Random) -> int:
    peer = Peer(path)
    count = {"events": 0}

    def answer(frame: Dict[str, Any], verdict: str) -> None:
        event = frame["event"]
        if verdict == "complete":
            if frame["name"] == "willPresent":
                value: Any = rng.sample(PRESENT_OPTIONS, rng.randint(0, 2))
                if profile == "mixed" and rng.random() < 0.3:
                    value = ["not-an-option"]  # an invalid completion: trace says "invalid"
            else:
                value = {"by": os.getpid(), "event": event}
            peer.send({"op": "complete", "event": event, "value": value})
        else:
            peer.send({"op": verdict, "event": event})

    def on_frame(frame: Dict[str, Any]) -> None:
        if frame.get("op") != "event":
            return
        count["events"] += 1
        roll = rng.random()
        # Most answers pass the event on, so that chains run long and every kind of hop
        # (next, complete, stop, gone, timeout, invalid) shows up in the traces.
        if profile == "next":
            answer(frame, "next")
        elif profile in ("complete", "stop"):
            answer(frame, profile if roll < 0.3 else "next")
        elif profile == "mixed":
            answer(frame, "next" if roll < 0.6 else rng.choice(["complete", "stop"]))
        elif profile == "slow":
            peer.later(rng.uniform(0.02, 0.15), lambda: answer(frame, "next" if roll < 0.8 else "complete"))
        elif profile == "hang":
            if roll < 0.1:
                pass  # never answers: the hop times out
            elif roll < 0.2:
                peer.later(rng.uniform(0.35, 0.7), lambda: answer(frame, "complete"))  # too late: ignored
            else:
                answer(frame, "next")

    peer.request({"op": "hello", "protocol": 1, "name": f"observer-{profile}"}, on_frame)
    for _ in range(rng.randint(1, 2)):
        events = rng.sample(EVENT_NAMES, rng.randint(1, 3))
        message: Dict[str, Any] = {"op": "subscribe", "events": events, "priority": rng.randint(-50, 50)}
        if rng.random() < 0.2:
            message["key"] = rng.choice(KEYS)  # keyed observers evict each other across processes
        peer.request(message, on_frame)
    peer.pump(until, on_frame)
    return 0


# MARK: handler


def handler_worker(path: str, profile: str, until: float, rng: random.Random) -> int:
    peer = Peer(path)
    routes = [(rng.choice(CHANNELS), rng.choice(METHODS + [None])) for _ in range(rng.randint(1, 3))]

    def give_back(frame: Dict[str, Any]) -> None:
        args = frame["arguments"]
        if profile == "erroring" and rng.random() < 0.5:
            peer.send(
                {
                    "op": "return",
                    "call": frame["call"],
                    "error": {"code": "E_CHAOS", "message": "chaos says no", "details": {"echo": args}},
                }
            )
        else:
            peer.send({"op": "return", "call": frame["call"], "result": {"echo": args, "handler": frame["handler"]}})

    def on_frame(frame: Dict[str, Any]) -> None:
        if frame.get("op") != "call":
            return
        if profile == "slow":
            peer.later(rng.uniform(0.05, 0.4), lambda: give_back(frame))
        elif profile == "sluggish" and rng.random() < 0.3:
            peer.later(rng.uniform(1.1, 1.8), lambda: give_back(frame))  # past the call timeout
        else:
            give_back(frame)

    def retake() -> None:
        channel, method = rng.choice(routes)
        peer.send({"op": "handle", "id": 1_000_000 + rng.randint(0, 1 << 20), "channel": channel, "method": method})
        peer.later(rng.uniform(2, 5), retake)

    peer.request({"op": "hello", "protocol": 1, "name": f"handler-{profile}"}, on_frame)
    for channel, method in routes:
        peer.request({"op": "handle", "channel": channel, "method": method}, on_frame)
    peer.later(rng.uniform(2, 5), retake)  # take a route back from whoever replaced us
    peer.pump(until, on_frame)
    return 0


# MARK: poster


def check_post(request: Dict[str, Any], reply: Dict[str, Any]) -> Optional[str]:
    """None if the post's reply is one the contract allows, else what is wrong."""
    if "error" in reply:
        code = sl.error_code(reply)
        return None if code == "queue_full" else f"post error {code}"
    r = reply.get("result")
    if not isinstance(r, dict) or set(r) != {"event", "outcome", "by", "value", "retained", "trace"}:
        return f"post result shape {r!r}"
    trace = r["trace"]
    if not isinstance(trace, list) or any(not isinstance(t, dict) or t.get("reply") not in HOPS for t in trace):
        return f"bad trace {trace!r}"
    # `skipped`: an observer of a connection whose hops in this event already took a hop
    # timeout (decision 30); it passes the event on like `next`.
    passing = {"next", "gone", "timeout", "invalid", "skipped"}
    outcome = r["outcome"]
    if outcome == "unhandled":
        if r["by"] is not None or r["value"] is not None or any(t["reply"] not in passing for t in trace):
            return f"unhandled with {r!r}"
    elif outcome in ("completed", "stopped"):
        last = "complete" if outcome == "completed" else "stop"
        if not trace or trace[-1]["reply"] != last or r["by"] != trace[-1]["observer"]:
            return f"{outcome} with trace {trace!r} by {r['by']!r}"
        if any(t["reply"] not in passing for t in trace[:-1]):
            return f"{outcome} after a final hop: {trace!r}"
        if outcome == "stopped" and r["value"] is not None:
            return f"stopped with a value {r['value']!r}"
        if request["name"] == "willPresent" and outcome == "completed":
            v = r["value"]
            if not isinstance(v, list) or len(set(v)) != len(v) or not set(v) <= set(PRESENT_OPTIONS):
                return f"willPresent completed with {v!r}"
    else:
        return f"outcome {outcome!r}"
    want_retained = "launch" if request["name"] == "didReceive" and outcome == "unhandled" else None
    if r["retained"] != want_retained:
        return f"retained {r['retained']!r} for {request['name']} {outcome}"
    return None


def check_invoke(request: Dict[str, Any], reply: Dict[str, Any]) -> tuple:
    """(kind, problem): kind names the answer for the tally; problem is None if allowed."""
    args = request["arguments"]
    if "error" in reply:
        code = sl.error_code(reply)
        if code == "E_CHAOS":
            ok = reply["error"].get("details") == {"echo": args}
            return code, None if ok else f"E_CHAOS details {reply['error']!r} for {args!r}"
        if code in ("timeout", "handler_gone", "not_implemented"):
            return code, None
        return str(code), f"invoke error {reply['error']!r}"
    result = reply.get("result")
    if not isinstance(result, dict) or result.get("echo") != args:
        return "result", f"invoke {args!r} answered with {result!r}"
    return "result", None


def poster_worker(path: str, until: float, rng: random.Random) -> int:
    stats: Dict[str, Any] = {
        "posts": 0,
        "invokes": 0,
        "answered_posts": 0,
        "answered_invokes": 0,
        "abandoned": 0,
        "dropped_connections": 0,
        "lost_connections": 0,
        "lost_requests": 0,
        "unanswered": 0,
        "unknown_replies": 0,
        "violations": 0,
        "examples": [],
        "outcomes": {},
        "invoke_answers": {},
        "max_invoke_ms": 0.0,
    }
    seq = 0

    def violation(text: str) -> None:
        stats["violations"] += 1
        if len(stats["examples"]) < 5:
            stats["examples"].append(text)

    def tally(table: str, key: str) -> None:
        stats[table][key] = stats[table].get(key, 0) + 1

    while time.time() < until:
        try:
            peer = Peer(path)
        except OSError as exc:
            violation(f"connect failed: {exc}")
            time.sleep(0.2)
            continue
        pending: Dict[int, tuple] = {}
        drop_at = time.time() + rng.uniform(3, 12)

        def on_frame(frame: Dict[str, Any], pending: Dict[int, tuple] = pending) -> None:
            if frame.get("op") != "reply":
                violation(f"unexpected frame {frame!r}"[:200])
                return
            entry = pending.pop(frame.get("id"), None)
            if entry is None:
                stats["unknown_replies"] += 1  # a second answer, or one to nothing we asked
                violation(f"reply to unknown id {frame!r}"[:200])
                return
            request, sent_at = entry
            if request["op"] == "post":
                stats["answered_posts"] += 1
                problem = check_post(request, frame)
                tally("outcomes", sl.error_code(frame) or frame["result"]["outcome"])
            else:
                stats["answered_invokes"] += 1
                kind, problem = check_invoke(request, frame)
                tally("invoke_answers", kind)
                stats["max_invoke_ms"] = max(stats["max_invoke_ms"], (time.monotonic() - sent_at) * 1000)
            if problem:
                violation(problem)

        try:
            peer.request({"op": "hello", "protocol": 1, "name": "poster"}, on_frame)
            while time.time() < until and time.time() < drop_at:
                posts_out = sum(1 for r, _ in pending.values() if r["op"] == "post")
                if len(pending) < 4:
                    seq += 1
                    rid = peer.next_id
                    peer.next_id += 1
                    if posts_out < 2 and rng.random() < 0.5:
                        name = rng.choice(POST_NAMES)
                        payload: Any = {"n": seq, "p": os.getpid(), "pad": "x" * rng.randint(0, 4000)}
                        if name == "willPresent":
                            payload = {"notification": NOTIFICATION}
                        elif name == "didReceive":
                            payload = {
                                "actionIdentifier": "com.apple.UNNotificationDefaultActionIdentifier",
                                "notification": NOTIFICATION,
                            }
                        request = {"op": "post", "id": rid, "name": name, "payload": payload}
                        stats["posts"] += 1
                    else:
                        request = {
                            "op": "invoke",
                            "id": rid,
                            "channel": rng.choice(INVOKE_CHANNELS),
                            "method": rng.choice(METHODS),
                            "arguments": {"p": os.getpid(), "n": seq, "pad": "y" * rng.randint(0, 4000)},
                        }
                        stats["invokes"] += 1
                    pending[rid] = (request, time.monotonic())
                    peer.send(request)
                # Pace the requests (about 60 a second at most) so the posters do not starve
                # the broker of the two cores.
                peer.pump(time.time() + rng.uniform(0.005, 0.03), on_frame)
            if time.time() < until:
                # Drop the connection with requests in flight: they are owed no answer.
                stats["abandoned"] += len(pending)
                stats["dropped_connections"] += 1
                peer.sock.close()
                continue
            peer.pump(time.time() + DRAIN_SECONDS, on_frame, stop=lambda pending=pending: not pending)
            stats["unanswered"] += len(pending)
            for request, _ in list(pending.values())[:3]:
                violation(f"no answer to {request!r}"[:200])
            peer.sock.close()
        except (sl.Closed, OSError, sl.Timeout) as exc:
            stats["lost_connections"] += 1
            stats["lost_requests"] += len(pending)
            violation(f"poster connection lost: {exc!r}")
            peer.sock.close()
    emit(stats)
    return 0


# MARK: garbage


def garbage_worker(path: str, until: float, rng: random.Random) -> int:
    stats: Dict[str, Any] = {"connections": 0, "violations": 0, "examples": [], "scenarios": {}}
    max_frame = 1 << 20

    def violation(text: str) -> None:
        stats["violations"] += 1
        if len(stats["examples"]) < 5:
            stats["examples"].append(text[:300])

    def expect(c: sl.Conn, what: str, pred: Callable[[Dict[str, Any]], bool]) -> None:
        try:
            frame = c.recv(3.0)
        except (sl.Closed, sl.Timeout) as exc:
            return violation(f"{what}: {exc!r}")
        if not pred(frame):
            violation(f"{what}: got {frame!r}")

    def error_frame(code: str, rid: Any = None) -> Callable[[Dict[str, Any]], bool]:
        return lambda f: f.get("op") == "reply" and f.get("id") == rid and sl.error_code(f) == code

    def ok_reply(rid: Any) -> Callable[[Dict[str, Any]], bool]:
        return lambda f: f.get("op") == "reply" and f.get("id") == rid and "result" in f

    def closed(c: sl.Conn, what: str) -> None:
        if not c.expect_eof(3.0):
            violation(f"{what}: connection left open")

    def random_bytes(c: sl.Conn) -> None:
        data = rng.randbytes(rng.randint(1, 3000))
        c.send_raw(data)
        length = struct.unpack(">I", data[:4])[0] if len(data) >= 4 else None
        if length is not None and (length == 0 or length > max_frame):
            expect(c, "random bytes with a bad length", error_frame("frame_too_large"))
            closed(c, "random bytes with a bad length")
        else:
            c.expect_eof(0.5)

    def bad_json(c: sl.Conn) -> None:
        bodies = [
            b"{not json",
            b"[1,2,3]",
            b"\xff\xfe\xfd",
            b'"a string"',
            b'{"op":"ping","id":1} x',
            b'{"op":"ping","id":NaN}',
            b"{,}",
            b"nul",
            bytes(rng.getrandbits(8) for _ in range(40)),
        ]
        for body in rng.sample(bodies, 4):
            c.send_raw(sl.raw_frame(body))
            try:
                frame = c.recv(3.0)
            except (sl.Closed, sl.Timeout) as exc:
                return violation(f"bad JSON {body!r}: {exc!r}")
            code = sl.error_code(frame)
            # Random bytes may, rarely, be a JSON object after all; anything else is bad_json.
            if code != "bad_json" and not (body[:1] == b"{" and code in ("hello_required", "bad_request")):
                return violation(f"bad JSON {body!r}: got {frame!r}")
            if code == "hello_required":
                return
        c.send({"op": "hello", "id": 1, "protocol": 1})
        expect(c, "hello after bad JSON", ok_reply(1))
        c.send({"op": "ping", "id": 2})
        expect(c, "ping after bad JSON", ok_reply(2))

    def oversized(c: sl.Conn) -> None:
        c.send({"op": "hello", "id": 1, "protocol": 1})
        expect(c, "hello", ok_reply(1))
        c.send_raw(struct.pack(">I", rng.randint(max_frame + 1, 0xFFFFFFFF)) + rng.randbytes(rng.randint(0, 64)))
        expect(c, "oversized length prefix", error_frame("frame_too_large"))
        closed(c, "oversized length prefix")

    def zero_length(c: sl.Conn) -> None:
        c.send_raw(b"\0\0\0\0")
        expect(c, "zero length prefix", error_frame("frame_too_large"))
        closed(c, "zero length prefix")

    def no_hello(c: sl.Conn) -> None:
        # hello_required echoes a request's usable id; an answer has none (decision 17).
        message = rng.choice(
            [{"op": "ping", "id": 1}, {"op": "post", "id": 2, "name": "x"}, {"op": "next", "event": 1}]
        )
        c.send(message)
        expect(c, "request before hello", error_frame("hello_required", message.get("id")))
        closed(c, "request before hello")

    def half_frame(c: sl.Conn) -> None:
        c.send({"op": "hello", "id": 1, "protocol": 1})
        expect(c, "hello", ok_reply(1))
        c.send_raw(struct.pack(">I", 1000) + b'{"op":"post","id":2,"na')

    def bogus_answers(c: sl.Conn) -> None:
        c.send({"op": "hello", "id": 1, "protocol": 1})
        expect(c, "hello", ok_reply(1))
        # Answers to hops and calls this connection was never given: ignored, silently.
        c.send({"op": "next", "event": rng.randint(1, 1 << 40)})
        c.send({"op": "return", "call": rng.randint(1, 1 << 40), "result": 1})
        # A malformed answer: an error frame, bad_request.
        c.send({"op": "complete", "event": "x"})
        expect(c, "malformed answer", error_frame("bad_request"))
        c.send({"op": "ping", "id": 2})
        expect(c, "ping after bogus answers", ok_reply(2))

    def unknown(c: sl.Conn) -> None:
        c.send({"op": "hello", "id": 1, "protocol": 1})
        expect(c, "hello", ok_reply(1))
        c.send({"op": "frobnicate", "id": 5})
        expect(c, "unknown op", error_frame("unknown_op", 5))
        c.send({"op": "ping", "id": 6, "kye": 1})
        expect(c, "unknown field", error_frame("bad_request", 6))
        c.send({"op": "ping", "id": -1})
        expect(c, "unusable id", error_frame("bad_request", None))
        c.send({"op": "ping", "id": 7})
        expect(c, "ping after bad requests", ok_reply(7))

    def trickle(c: sl.Conn) -> None:
        for b in sl.encode({"op": "hello", "id": 1, "protocol": 1}) + sl.encode({"op": "ping", "id": 2}):
            c.send_raw(bytes([b]))
        expect(c, "hello sent byte by byte", ok_reply(1))
        expect(c, "ping sent byte by byte", ok_reply(2))

    scenarios = {
        f.__name__: f
        for f in (random_bytes, bad_json, oversized, zero_length, no_hello, half_frame, bogus_answers, unknown, trickle)
    }
    while time.time() < until:
        name = rng.choice(list(scenarios) + ["connect_close"])
        stats["scenarios"][name] = stats["scenarios"].get(name, 0) + 1
        stats["connections"] += 1
        try:
            with sl.Conn(path, timeout=5) as c:
                if name != "connect_close":
                    scenarios[name](c)
        except (OSError, sl.Closed, sl.Timeout) as exc:
            if name not in ("random_bytes", "half_frame"):
                violation(f"{name}: {exc!r}")
        time.sleep(rng.uniform(0.01, 0.05))
    emit(stats)
    return 0


# MARK: non-reader


def nonreader_worker(path: str, until: float, rng: random.Random) -> int:
    """Subscribes and monitors, then never reads: the broker must cut it off."""
    stats: Dict[str, Any] = {"connections": 0, "cut_off": 0, "not_cut": 0, "cut_seconds": []}
    while time.time() < until - 1:
        stats["connections"] += 1
        with sl.Conn(path, timeout=5) as c:
            c.hello("non-reader")
            c.request("subscribe", events=["chaos.c"], priority=1000)
            c.send({"op": "monitor", "id": 99})
            started = time.monotonic()
            # Never read again; watch for the hang-up without reading a byte.
            if sl.peer_hung_up(c.sock, max(0.0, min(30.0, until - time.time()))):
                stats["cut_off"] += 1
                stats["cut_seconds"].append(round(time.monotonic() - started, 2))
            else:
                stats["not_cut"] += 1
        time.sleep(rng.uniform(0.1, 0.5))
    emit(stats)
    return 0


def run_worker(args: argparse.Namespace) -> int:
    rng = random.Random(args.seed)
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)
    try:
        if args.worker == "observer":
            return observer_worker(args.socket, args.profile, args.until, rng)
        if args.worker == "handler":
            return handler_worker(args.socket, args.profile, args.until, rng)
        if args.worker == "poster":
            return poster_worker(args.socket, args.until, rng)
        if args.worker == "garbage":
            return garbage_worker(args.socket, args.until, rng)
        if args.worker == "nonreader":
            return nonreader_worker(args.socket, args.until, rng)
    except (sl.Closed, OSError, sl.Timeout) as exc:
        print(f"{args.worker} {os.getpid()}: {exc!r}", file=sys.stderr)
        return 3
    raise SystemExit(f"unknown worker {args.worker}")


# MARK: controller


class Fleet:
    """The worker processes; restarts killed observers and handlers until the deadline."""

    def __init__(self, socket_path: str, until: float, log: Any, rng: random.Random) -> None:
        self.socket = socket_path
        self.until = until
        self.log = log
        self.rng = rng
        self.procs: Dict[str, List[tuple]] = {k: [] for k in DEFAULT_COUNTS}
        self.finished: List[tuple] = []
        self.kills = {"observer": 0, "handler": 0}
        self.restarts: List[tuple] = []  # (when, kind, profile)

    def spawn(self, kind: str, profile: str = "-") -> None:
        cmd = [
            sys.executable,
            os.path.abspath(__file__),
            "--worker",
            kind,
            "--socket",
            self.socket,
            "--until",
            repr(self.until),
            "--seed",
            str(self.rng.getrandbits(32)),
            "--profile",
            profile,
        ]
        out = subprocess.PIPE if kind in ("poster", "garbage", "nonreader") else subprocess.DEVNULL
        p = sl.track(subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=self.log))
        self.procs[kind].append((p, profile))

    def kill_one(self) -> None:
        kind = self.rng.choice(["observer", "observer", "handler"])
        live = [(p, prof) for p, prof in self.procs[kind] if p.poll() is None]
        if not live:
            return
        p, profile = self.rng.choice(live)
        p.kill()
        p.wait(timeout=5)
        self.procs[kind].remove((p, profile))
        self.kills[kind] += 1
        self.restarts.append((time.monotonic() + self.rng.uniform(0.1, 1.0), kind, profile))

    def restart_due(self) -> None:
        now = time.monotonic()
        for entry in [r for r in self.restarts if r[0] <= now]:
            self.restarts.remove(entry)
            if time.time() < self.until - 1:
                self.spawn(entry[1], entry[2])


def controller(args: argparse.Namespace) -> int:
    sl.install_signal_cleanup()
    rng = random.Random(args.seed)
    checks = sl.Checks("chaos")
    folder = sl.fresh_folder("nb-chaos-")
    binary = sl.snapshot_binary(folder)
    broker = sl.Broker(binary, folder, BROKER_ARGS).start()
    time.sleep(0.2)
    fds_before = broker.fds()
    rss_start = broker.rss_kib()
    sampler = sl.RSSSampler(broker.pid, 0.05)
    print(f"chaos: broker pid {broker.pid} on {broker.socket}, {args.seconds:.0f} s, seed {args.seed}", flush=True)

    until = time.time() + 2.0 + args.seconds  # 2 s for the workers to start
    worker_log = open(os.path.join(folder, "workers.log"), "ab")
    fleet = Fleet(broker.socket, until, worker_log, rng)
    for i in range(DEFAULT_COUNTS["observer"]):
        fleet.spawn("observer", OBSERVER_PROFILES[i % len(OBSERVER_PROFILES)])
    for i in range(DEFAULT_COUNTS["handler"]):
        fleet.spawn("handler", HANDLER_PROFILES[i % len(HANDLER_PROFILES)])
    for kind in ("poster", "garbage", "nonreader"):
        for _ in range(DEFAULT_COUNTS[kind]):
            fleet.spawn(kind)

    next_kill = time.monotonic() + 3.0
    crashed = False
    while time.time() < until:
        if not broker.alive():
            crashed = True
            break
        if time.monotonic() >= next_kill and time.time() < until - 2:
            fleet.kill_one()
            next_kill = time.monotonic() + rng.uniform(0.2, 0.8)
        fleet.restart_due()
        time.sleep(0.05)

    # Posters drain for up to DRAIN_SECONDS; everyone else stops at the deadline.
    reports: Dict[str, List[Dict[str, Any]]] = {"poster": [], "garbage": [], "nonreader": []}
    finish_by = time.monotonic() + DRAIN_SECONDS + 10
    exit_codes: Dict[str, List[int]] = {k: [] for k in DEFAULT_COUNTS}
    for kind in DEFAULT_COUNTS:
        for p, _profile in fleet.procs[kind]:
            try:
                out, _ = p.communicate(timeout=max(0.1, finish_by - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
                out, _ = p.communicate(timeout=5)
            exit_codes[kind].append(p.returncode)
            if kind in reports and out:
                for line in out.decode().splitlines():
                    reports[kind].append(json.loads(line))
    worker_log.close()

    def total(kind: str, field: str) -> int:
        return sum(r.get(field, 0) for r in reports[kind])

    posts, invokes = total("poster", "posts"), total("poster", "invokes")
    answered = total("poster", "answered_posts") + total("poster", "answered_invokes")
    abandoned, lost = total("poster", "abandoned"), total("poster", "lost_requests")
    unanswered = total("poster", "unanswered")
    examples = [e for r in reports["poster"] + reports["garbage"] for e in r.get("examples", [])]

    alive_after = broker.alive() and not crashed
    fds_after = broker.wait_fds(fds_before, 8.0) if alive_after else -1
    status: Dict[str, Any] = {}
    ping_ok = False
    if alive_after:
        try:
            with sl.Conn(broker.socket) as c:
                c.hello("chaos-check")
                ping_ok = "result" in c.request("ping")
                status = sl.full_status(c)
        except (OSError, sl.Closed, sl.Timeout) as exc:
            print(f"  final check connection failed: {exc!r}")
        fds_final = broker.wait_fds(fds_before, 5.0)
    else:
        fds_final = -1
    rss_end = broker.rss_kib() if broker.alive() else 0
    peak_sampled = sampler.stop()
    peak_kib = max(peak_sampled, broker.hwm_kib() if broker.alive() else 0)
    nonreaders_at_once = DEFAULT_COUNTS["nonreader"]
    # The bound: the start-up footprint, plus for every connection that stops reading twice
    # --max-output (16 MiB queued, and an array that may have doubled its capacity while it
    # grew), plus 64 MiB for everything else (frames in flight for ~100 connections, the
    # allocator's slack). A leak of even a few hundred bytes per request (about 10^5 here)
    # or one unbounded queue would go well past it.
    bound_kib = rss_start + nonreaders_at_once * 2 * 16 * 1024 + 64 * 1024
    cut_logged = sl.log_count(broker.log(), "cut off")
    rc = broker.terminate()

    print()
    print(f"{'figure':<34}{'value':>14}")
    rows = [
        ("seconds", args.seconds),
        ("posts sent", posts),
        ("invokes sent", invokes),
        ("answers received", answered),
        ("abandoned with a dropped conn.", abandoned),
        ("lost with a broken conn.", lost),
        ("unanswered", unanswered),
        ("connections dropped by posters", total("poster", "dropped_connections")),
        ("connections lost by posters", total("poster", "lost_connections")),
        ("observers killed", fleet.kills["observer"]),
        ("handlers killed", fleet.kills["handler"]),
        ("garbage connections", total("garbage", "connections")),
        ("non-readers cut off", total("nonreader", "cut_off")),
        ("non-readers not cut off", total("nonreader", "not_cut")),
        ("'cut off' lines in broker log", cut_logged),
        ("broker fds before", fds_before),
        ("broker fds after", fds_final),
        ("broker RSS at start", sl.mib(rss_start)),
        ("broker peak RSS", sl.mib(peak_kib)),
        ("broker RSS at the end", sl.mib(rss_end)),
        ("RSS bound", sl.mib(bound_kib)),
        ("max invoke latency (ms)", round(max([r.get("max_invoke_ms", 0) for r in reports["poster"]] or [0]))),
    ]
    for name, value in rows:
        print(f"{name:<34}{value!s:>14}")
    outcomes: Dict[str, int] = {}
    answers: Dict[str, int] = {}
    for r in reports["poster"]:
        for k, v in r.get("outcomes", {}).items():
            outcomes[k] = outcomes.get(k, 0) + v
        for k, v in r.get("invoke_answers", {}).items():
            answers[k] = answers.get(k, 0) + v
    print(f"post outcomes: {outcomes}")
    print(f"invoke answers: {answers}")
    scenarios: Dict[str, int] = {}
    for r in reports["garbage"]:
        for k, v in r.get("scenarios", {}).items():
            scenarios[k] = scenarios.get(k, 0) + v
    print(f"garbage scenarios: {dict(sorted(scenarios.items()))}")
    if status:
        print(f"broker counters: {status.get('counters')}")
    cut_times = [t for r in reports["nonreader"] for t in r.get("cut_seconds", [])]
    print(f"non-reader cut-off times (s): {cut_times}")
    print()

    checks.check("broker never crashed during the run", alive_after, f"exit status {broker.process.returncode}")
    checks.check(
        "all posters reported",
        len(reports["poster"]) == DEFAULT_COUNTS["poster"],
        f"{len(reports['poster'])} of {DEFAULT_COUNTS['poster']}, exit codes {exit_codes['poster']}",
    )
    checks.check(
        "every request answered once or its connection closed",
        posts + invokes == answered + abandoned + lost and unanswered == 0 and total("poster", "unknown_replies") == 0,
        f"sent {posts + invokes} = answered {answered} + abandoned {abandoned} + lost {lost}; "
        f"unanswered {unanswered}, duplicate/unknown replies {total('poster', 'unknown_replies')}",
    )
    checks.check("no poster connection was closed by the broker", total("poster", "lost_connections") == 0)
    steady = exit_codes["observer"] + exit_codes["handler"]
    checks.check(
        "observers and handlers not killed by us ran to the end",
        all(c == 0 for c in steady),
        f"exit codes other than 0: {[c for c in steady if c != 0]}",
    )
    checks.check("every reply is one the contract allows", total("poster", "violations") == 0, "; ".join(examples[:5]))
    checks.check(
        "garbage got the errors the contract names",
        total("garbage", "violations") == 0,
        "; ".join(e for r in reports["garbage"] for e in r.get("examples", []))[:600],
    )
    if args.seconds >= 15:  # a non-reader fills its 16 MiB in about 5 s of chaos traffic
        checks.check(
            "non-readers were cut off by the output bound",
            total("nonreader", "cut_off") >= 1 and cut_logged >= 1,
            f"{total('nonreader', 'cut_off')} cut off, {cut_logged} logged",
        )
    kills = sum(fleet.kills.values())
    # Work, not speed: every poster had posts and invokes answered, and workers were killed
    # under them (how many per second is the figures' to tell).
    idle = [r for r in reports["poster"] if not r.get("outcomes") or not r.get("invoke_answers")]
    checks.check(
        "some work got done",
        not idle and answered > 0 and kills >= 1,
        f"{posts} posts, {invokes} invokes, {kills} kills in {args.seconds:.0f} s; "
        f"{len(idle)} poster(s) with nothing answered",
    )
    checks.check(
        "broker fds back to baseline",
        fds_after == fds_before and fds_final == fds_before,
        f"before {fds_before}, after the clients left {fds_after}, after the final check {fds_final}",
    )
    checks.check("broker answers ping afterwards", ping_ok)
    if status:
        leftovers = {k: status.get(k) for k in ("observers", "handlers")}
        checks.check(
            "no state left behind",
            len(status.get("clients", [])) == 1
            and not status.get("observers")
            and not status.get("handlers")
            and status.get("queue", {}).get("pending") == 0
            and status.get("queue", {}).get("current", 0) is None,
            f"clients {len(status.get('clients', []))}, {leftovers}, queue {status.get('queue')}",
        )
    checks.check("peak RSS under the bound", 0 < peak_kib <= bound_kib, f"{sl.mib(peak_kib)} <= {sl.mib(bound_kib)}")
    checks.check("broker exits 0 on SIGTERM", rc == 0, f"exit status {rc}")
    code = checks.report()
    if code:
        os.remove(binary)
        print(f"(broker log and workers.log kept in {folder}; the same run again: --seed {args.seed})")
    else:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    return code


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="length of the chaos phase (default 60)")
    parser.add_argument("--seed", type=int, default=None, help="random seed (default: from the clock)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--socket", help=argparse.SUPPRESS)
    parser.add_argument("--until", type=float, help=argparse.SUPPRESS)
    parser.add_argument("--profile", default="-", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seed is None:
        args.seed = int(time.time())
    if args.worker:
        return run_worker(args)
    return controller(args)


if __name__ == "__main__":
    sys.exit(main())
