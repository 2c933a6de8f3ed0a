#!/usr/bin/env python3
"""Durability of `--state-dir`: acknowledged writes survive SIGKILL, and a damaged
journal is detected, reported, kept aside, and does not stop the broker.

Rounds (`--rounds`, default 5): a client streams pipelined `put`s (some large, so that
the journal compacts), `put null`s, `take`s and `setCategories` on one connection, and
records which were acknowledged. The broker is SIGKILLed at a random moment. After a
restart on the same folder the state must be exactly the state after some prefix of the
sent writes that includes every acknowledged one (the broker handles one connection's
requests in order, so nothing acknowledged may be missing and nothing may be reordered).

Journal damage (the format is in Sources/NotifBusTransport/StateJournal.swift): a journal
cut in the middle of its last record, one with bytes flipped inside a record in the middle,
and one with a bad header. Each time the broker must say so on stderr, start with the
records before the damage, and keep the damaged file as state.journal.corrupt-*. On a
full disk, where no fresh journal can be written, the damaged one stays in place, so that
a crash does not make the next start empty.

Idempotency keys (`--keyed-rounds`, default 5): a client pipelines keyed posts (to an
observer that answers after a few milliseconds, in another thread) and keyed puts to one
slot; the broker is SIGKILLed at a random moment and restarted, and every request is sent
again with its key. A request answered before the kill must come back as a repeat with the
same result; a post is answered a repeat (it ended), `interrupted` (its chain was cut) or
runs as new (it was only queued); the puts come back as repeats up to some point and are
applied as new after it, in order; and no post reaches the observer twice, in either life.

What the wire accepted is read back: slot values and a retained `didReceive` payload
nested 600 deep survive SIGKILL and SIGTERM. Anything but a regular file at the journal's
path (FIFO, socket, device, symbolic link) is refused at once with exit 1.

A full disk (a small tmpfs; needs root): a write that could not be stored is answered
`storage_failed` and changes nothing, not even in memory (`peek`); a `take`, an emptying
`put` and the consumption of a retained launch payload are answered only once their removal
is on disk, so a refused one leaves the value in its slot, also after a restart. A broker
started on a full disk with an intact journal starts from it, postpones compaction with
one warning, refuses writes while the disk is full and stores them again once there is room.
"""

from __future__ import annotations

import argparse
import copy
import glob
import json
import os
import random
import signal
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
import zlib
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stresslib as sl  # noqa: E402

SLOTS = [f"s{i}" for i in range(40)]
MAGIC = b"NBJRNL01"
KIND_SLOT, KIND_EMPTIED, KIND_CATEGORIES, KIND_KEYED = 1, 2, 3, 4
WINDOW = 32


# MARK: the journal format, independently of the broker


def parse_journal(data: bytes) -> Tuple[List[Dict[str, Any]], Optional[str]]:
    """The valid records, in order, and a description of the first bad one (or None)."""
    if not data:
        return [], None
    if data[:8] != MAGIC:
        return [], "bad header"
    records, offset = [], 8
    while offset < len(data):
        if len(data) - offset < 8:
            return records, f"truncated record header at byte {offset}"
        length, crc = struct.unpack(">II", data[offset : offset + 8])
        if length < 3 or length > 64 << 20:
            return records, f"bad record length {length} at byte {offset}"
        if len(data) - offset - 8 < length:
            return records, f"truncated record at byte {offset}"
        body = data[offset + 8 : offset + 8 + length]
        if zlib.crc32(body) != crc:
            return records, f"checksum mismatch at byte {offset}"
        kind, name_length = body[0], struct.unpack(">H", body[1:3])[0]
        if 3 + name_length > len(body):
            return records, f"bad name length at byte {offset}"
        if kind not in (KIND_SLOT, KIND_EMPTIED, KIND_CATEGORIES, KIND_KEYED):
            return records, f"unknown record kind {kind} at byte {offset}"
        record = {
            "offset": offset,
            "size": 8 + length,
            "kind": kind,
            "name": body[3 : 3 + name_length].decode(),
            "value": body[3 + name_length :],
        }
        if kind == KIND_KEYED:
            keyed = parse_keyed(record["value"])
            if keyed is None:
                return records, f"bad keyed record at byte {offset}"
            record["keys"], (record["kind"], record["name"], record["value"]) = keyed
        records.append(record)
        offset += 8 + length
    return records, None


def parse_keyed(value: bytes) -> Optional[Tuple[List[Dict[str, Any]], Tuple[int, str, bytes]]]:
    """A keyed record's keys, and its change as (kind, name, value); kind 0: none."""
    try:
        (count,), p, keys = struct.unpack(">H", value[:2]), 2, []
        for _ in range(count):
            (key_length,) = struct.unpack(">H", value[p : p + 2])
            key = value[p + 2 : p + 2 + key_length].decode()
            p += 2 + key_length
            op, fingerprint, wall_ms, outcome_kind, outcome_length = struct.unpack(">BQqBI", value[p : p + 22])
            p += 22
            outcome = value[p : p + outcome_length]
            p += outcome_length
            keys.append(
                {
                    "key": key,
                    "op": op,
                    "fingerprint": fingerprint,
                    "wallMs": wall_ms,
                    "outcome": None if outcome_kind == 0 else (outcome_kind, json.loads(outcome)),
                }
            )
        kind, (name_length,) = value[p], struct.unpack(">H", value[p + 1 : p + 3])
        name = value[p + 3 : p + 3 + name_length].decode()
        return keys, (kind, name, value[p + 3 + name_length :])
    except (struct.error, IndexError, UnicodeDecodeError, ValueError):
        return None


def replay(records: List[Dict[str, Any]]) -> Tuple[Dict[str, Any], Optional[list]]:
    slots: Dict[str, Any] = {}
    categories = None
    for r in records:
        if r["kind"] == KIND_SLOT:
            slots[r["name"]] = json.loads(r["value"])
        elif r["kind"] == KIND_EMPTIED:
            slots.pop(r["name"], None)
        elif r["kind"] == KIND_CATEGORIES:
            categories = json.loads(r["value"])
    return slots, categories


# MARK: reading a broker's state back


def read_state(path: str, names: List[str]) -> Tuple[Dict[str, Any], list, List[str]]:
    """Slots (via peek, which changes nothing), categories and status's slot list."""
    with sl.Conn(path, timeout=10) as c:
        c.hello("durability-check")
        slots = {}
        for name in names:
            value = c.request("peek", slot=name)["result"]
            if value is not None:
                slots[name] = value
        categories = c.request("getCategories")["result"]["categories"]
        listed = sl.full_status(c)["slots"]
    return slots, categories, listed


def category_set(tag: int) -> list:
    return [
        {
            "identifier": f"C{tag}",
            "options": ["customDismissAction"],
            "actions": [{"identifier": "OPEN", "title": f"Open {tag}", "options": ["foreground"]}],
        },
        {"identifier": "PLAIN", "actions": []},
    ]


# MARK: kill rounds


class Stream:
    """Pipelined writes on one connection; the model of every state a prefix can give."""

    def __init__(self, path: str, slots: Dict[str, Any], categories: list, rng: random.Random, tag: int) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(path)
        self.sock.sendall(sl.encode({"op": "hello", "id": "hello", "protocol": 1, "name": "durability"}))
        self.buf = bytearray()
        while len(self.buf) < 4 or len(self.buf) < 4 + struct.unpack(">I", self.buf[:4])[0]:
            data = self.sock.recv(1 << 16)
            if not data:
                raise sl.Closed("closed before the hello reply")
            self.buf += data
        del self.buf[: 4 + struct.unpack(">I", self.buf[:4])[0]]
        self.rng = rng
        self.tag = tag
        self.writes: List[Dict[str, Any]] = []  # in send order
        self.acked = 0  # writes[:acked] are acknowledged
        self.start_state = (copy.deepcopy(slots), copy.deepcopy(categories))
        self.model_slots = copy.deepcopy(slots)  # the state after every sent write
        self.model_categories = copy.deepcopy(categories)
        self.problems: List[str] = []
        self.large = 0

    def next_write(self, n: int) -> Dict[str, Any]:
        roll = self.rng.random()
        slot = self.rng.choice(SLOTS)
        if roll < 0.07:
            self.model_categories = category_set(self.tag * 100000 + n)
            return {"op": "setCategories", "categories": self.model_categories}
        if roll < 0.12:
            self.model_slots.pop(slot, None)
            return {"op": "put", "slot": slot, "value": None}
        if roll < 0.15:
            expect = self.model_slots.pop(slot, None)
            return {"op": "take", "slot": slot, "expect": expect}
        size = self.rng.randint(0, 200)
        if self.rng.random() < 0.03:
            size = self.rng.randint(50_000, 200_000)  # grows the journal: compaction runs
            self.large += 1
        value = {"round": self.tag, "write": n, "pad": "p" * size}
        self.model_slots[slot] = value
        return {"op": "put", "slot": slot, "value": value}

    def run(self, limit: float) -> str:
        """Writes until the connection breaks (the broker was killed) or `limit` passes."""
        n = 0
        deadline = time.monotonic() + limit
        try:
            while time.monotonic() < deadline:
                while len(self.writes) - self.acked < WINDOW:
                    w = self.next_write(n)
                    message = {k: v for k, v in w.items() if k != "expect"}
                    self.sock.sendall(sl.encode({**message, "id": n}))
                    self.writes.append(w)
                    n += 1
                data = self.sock.recv(1 << 20)
                if not data:
                    return "closed"
                self.buf += data
                while len(self.buf) >= 4:
                    size = struct.unpack(">I", self.buf[:4])[0]
                    if len(self.buf) < 4 + size:
                        break
                    frame = json.loads(bytes(self.buf[4 : 4 + size]))
                    del self.buf[: 4 + size]
                    self.acknowledge(frame)
            return "time"
        except (ConnectionResetError, BrokenPipeError):
            return "reset"
        finally:
            self.sock.close()

    def acknowledge(self, frame: Dict[str, Any]) -> None:
        if frame.get("id") != self.acked:
            self.problems.append(f"reply out of order: expected id {self.acked}, got {frame}"[:300])
            return
        w = self.writes[self.acked]
        if "result" not in frame:
            self.problems.append(f"write {self.acked} refused: {frame}"[:300])
        elif w["op"] == "take" and frame["result"] != w["expect"]:
            self.problems.append(f"take {w['slot']} gave {str(frame['result'])[:80]}, expected {str(w['expect'])[:80]}")
        self.acked += 1

    def candidate_states(self) -> List[Tuple[int, Dict[str, Any], list]]:
        """(prefix length, slots, categories) for every prefix from the acknowledged on."""
        slots, categories = copy.deepcopy(self.start_state[0]), copy.deepcopy(self.start_state[1])
        out = []
        for i, w in enumerate(self.writes):
            if i >= self.acked:
                out.append((i, copy.deepcopy(slots), copy.deepcopy(categories)))
            if w["op"] == "setCategories":
                categories = w["categories"]
            elif w["op"] == "take" or w.get("value") is None:
                slots.pop(w["slot"], None)
            else:
                slots[w["slot"]] = w["value"]
        out.append((len(self.writes), slots, categories))
        return out


def kill_rounds(checks: sl.Checks, binary: str, folder: str, rounds: int, rng: random.Random) -> Dict[str, Any]:
    state_dir = os.path.join(folder, "state")
    broker = sl.Broker(binary, folder, ["--state-dir", state_dir]).start()
    slots: Dict[str, Any] = {}
    categories: list = []
    figures = {"rounds": 0, "acked": 0, "sent": 0, "unacked_landed": 0, "large": 0, "torn_tails": 0}
    for r in range(1, rounds + 1):
        stream = Stream(broker.socket, slots, categories, rng, r)
        kill_after = rng.uniform(0.4, 2.0)
        timer = threading.Timer(kill_after, lambda b=broker: os.kill(b.pid, signal.SIGKILL))
        timer.start()
        how = stream.run(kill_after + 10)
        timer.join()
        broker.wait_exit(5)
        checks.check(
            f"round {r}: broker killed mid-stream",
            how in ("closed", "reset") and stream.acked > 0,
            f"stream ended by {how} after {len(stream.writes)} sent, {stream.acked} acknowledged",
        )
        checks.check(
            f"round {r}: replies consistent while streaming", not stream.problems, "; ".join(stream.problems[:3])
        )
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir]).start()
        restart_log = broker.log()
        if "state journal" in restart_log:
            # A kill in the middle of a large write may leave a torn last record. That is
            # allowed (it was not acknowledged); what counts is the check below.
            figures["torn_tails"] += 1
            print(f"    (round {r}: the kill left a torn tail: {restart_log.strip()[:200]})")
        got_slots, got_categories, listed = read_state(broker.socket, SLOTS)
        matches = [i for i, s, c in stream.candidate_states() if s == got_slots and c == got_categories]
        checks.check(
            f"round {r}: every acknowledged write survived SIGKILL",
            bool(matches),
            f"{stream.acked} acknowledged of {len(stream.writes)} sent; restored state is "
            + (
                f"the state after {matches[0]} writes"
                if matches
                else f"no prefix >= {stream.acked}: {describe_diff(stream, got_slots, got_categories)}"
            ),
        )
        checks.check(
            f"round {r}: status lists the restored slots",
            listed == sorted(got_slots),
            f"{len(listed)} listed, {len(got_slots)} peeked",
        )
        figures["rounds"] += 1
        figures["acked"] += stream.acked
        figures["sent"] += len(stream.writes)
        figures["large"] += stream.large
        if matches:
            figures["unacked_landed"] += matches[0] - stream.acked
        slots, categories = got_slots, got_categories
    rc = broker.terminate()
    checks.check("broker with --state-dir exits 0 on SIGTERM", rc == 0, f"exit status {rc}")
    return figures


def describe_diff(stream: Stream, got_slots: Dict[str, Any], got_categories: list) -> str:
    acked_state = stream.candidate_states()[0]
    want_slots, want_categories = acked_state[1], acked_state[2]
    diffs = []
    for name in sorted(set(want_slots) | set(got_slots)):
        a, b = want_slots.get(name), got_slots.get(name)
        if a != b:
            short = lambda v: None if v is None else {k: v[k] for k in ("round", "write") if k in v}  # noqa: E731
            diffs.append(f"{name}: want {short(a)} got {short(b)}")
    if want_categories != got_categories:
        diffs.append(f"categories want {want_categories[:1]} got {got_categories[:1]}")
    return "; ".join(diffs[:5])


# MARK: idempotency keys under SIGKILL

KEYED_EVENT = "once.e"
KEYED_SLOT = "once-slot"


class KeyedObserver:
    """Observes KEYED_EVENT on a raw connection in a thread of its own, answering `next`
    after 0 to 6 ms; `seen` gets (life, i) for every event frame, i from the payload."""

    def __init__(self, path: str, life: int, seen: List[Tuple[int, int]], rng: random.Random) -> None:
        self.conn = sl.Conn(path, timeout=10)
        self.conn.hello(f"observer-{life}")
        reply = self.conn.request("subscribe", events=[KEYED_EVENT])
        if "result" not in reply:
            raise RuntimeError(f"subscribe refused: {reply}")
        self.life, self.seen, self.delays = life, seen, [rng.uniform(0, 0.006) for _ in range(64)]
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def run(self) -> None:
        n = 0
        try:
            while True:
                frame = self.conn.recv(timeout=60)
                if frame.get("op") != "event":
                    continue
                self.seen.append((self.life, frame["payload"]["i"]))
                time.sleep(self.delays[n % len(self.delays)])
                n += 1
                self.conn.send({"op": "next", "event": frame["event"]})
        except (sl.Closed, sl.Timeout, OSError):
            pass

    def close(self) -> None:
        self.conn.close()
        self.thread.join(5)


def keyed_requests(tag: int, count: int) -> List[Dict[str, Any]]:
    """Posts and puts, interleaved, each with a key of its own."""
    out = []
    for i in range(count):
        if i % 2 == 0:
            out.append({"op": "post", "name": KEYED_EVENT, "once": f"r{tag}-post-{i}", "payload": {"i": i}})
        else:
            out.append({"op": "put", "slot": KEYED_SLOT, "value": {"r": tag, "i": i}, "once": f"r{tag}-put-{i}"})
    return out


def keyed_round(
    checks: sl.Checks, binary: str, folder: str, tag: int, rng: random.Random, figures: Dict[str, int]
) -> None:
    state_dir = os.path.join(folder, "state-keyed")
    args = ["--state-dir", state_dir, "--hop-timeout", "5s"]
    broker = sl.Broker(binary, folder, args, log_name=f"keyed-{tag}.log").start()
    seen: List[Tuple[int, int]] = []
    observer = KeyedObserver(broker.socket, 1, seen, rng)
    requests = keyed_requests(tag, 400)
    first: Dict[int, Dict[str, Any]] = {}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10)
    sock.connect(broker.socket)
    writer = sl.Conn(broker.socket, connect=False)
    writer.sock = sock
    writer.hello(f"writer-{tag}")
    kill_after = rng.uniform(0.05, 0.6)
    timer = threading.Timer(kill_after, lambda b=broker: os.kill(b.pid, signal.SIGKILL))
    timer.start()
    sent = 0
    try:
        while sent < len(requests) or len(first) < sent:
            while sent < len(requests) and sent - len(first) < 16:
                writer.send({**requests[sent], "id": sent})
                sent += 1
            frame = writer.recv(timeout=15)
            if frame.get("op") == "reply" and isinstance(frame.get("id"), int):
                first[frame["id"]] = frame
    except (sl.Closed, sl.Timeout, OSError):
        pass
    timer.join()
    broker.wait_exit(5)
    writer.close()
    observer.close()
    killed_mid = len(first) < len(requests)

    broker = sl.Broker(binary, folder, args, log_name=f"keyed-{tag}-again.log").start()
    observer = KeyedObserver(broker.socket, 2, seen, rng)
    again: Dict[int, Dict[str, Any]] = {}
    with sl.Conn(broker.socket, timeout=30) as c:
        c.hello(f"writer-{tag}-again")
        for n in range(sent):
            c.send({**requests[n], "id": f"again-{n}"})
        while len(again) < sent:
            frame = c.recv(timeout=30)
            if frame.get("op") == "reply" and str(frame.get("id", "")).startswith("again-"):
                again[int(frame["id"][6:])] = frame
        final = c.request("peek", slot=KEYED_SLOT)["result"]
    observer.close()
    broker.terminate()

    problems: List[str] = []
    counts: Dict[int, List[int]] = {}
    for life, i in seen:
        counts.setdefault(i, [0, 0, 0])[life] += 1
    applied_puts: List[int] = []
    for n in range(sent):
        before, after = first.get(n), again[n]
        repeat = after.get("repeat") is True
        if before is not None and not (repeat and after.get("result") == before.get("result")):
            problems.append(
                f"{requests[n]['once']}: answered {str(before)[:120]} before the kill, then {str(after)[:160]}"
            )
        if requests[n]["op"] == "post":
            c1, c2 = counts.get(n, [0, 0, 0])[1:]
            code = (after.get("error") or {}).get("code")
            if c1 + c2 > 1:
                problems.append(f"{requests[n]['once']}: reached the observer {c1 + c2} times")
            if repeat and code == "interrupted":
                figures["interrupted"] += 1
                if c2:
                    problems.append(f"{requests[n]['once']}: interrupted, yet it ran after the restart")
            elif repeat and "result" in after:
                figures["post_repeats"] += 1
                if c2 or c1 != len(after["result"]["trace"]):
                    problems.append(
                        f"{requests[n]['once']}: a repeat of a post seen {c1} + {c2} times, trace {after['result']['trace']}"
                    )
            elif not repeat and "result" in after:
                figures["post_fresh"] += 1
                if c1:
                    problems.append(f"{requests[n]['once']}: seen before the kill, yet applied as new after it")
            else:
                problems.append(f"{requests[n]['once']}: answered {str(after)[:160]}")
        else:
            if "result" not in after:
                problems.append(f"{requests[n]['once']}: answered {str(after)[:160]}")
            elif repeat:
                figures["put_repeats"] += 1
                if applied_puts:
                    problems.append(f"{requests[n]['once']}: a repeat after put {applied_puts[-1]} was applied as new")
            else:
                figures["put_fresh"] += 1
                applied_puts.append(n)
    last_put = max(n for n in range(sent) if requests[n]["op"] == "put") if sent > 1 else None
    if last_put is not None and final != requests[last_put]["value"]:
        problems.append(f"the slot holds {final}, not the last put {requests[last_put]['value']}")
    figures["answered_before"] += len(first)
    figures["sent"] += sent
    checks.check(
        f"keyed round {tag}: the broker was killed with requests in flight",
        killed_mid and sent > 0,
        f"{sent} sent, {len(first)} answered before the kill at {kill_after:.2f} s",
    )
    checks.check(
        f"keyed round {tag}: after the restart every repeat gets the first outcome, never a second application",
        not problems,
        "; ".join(problems[:4]),
    )


def keyed_rounds(checks: sl.Checks, binary: str, folder: str, rounds: int, rng: random.Random) -> Dict[str, int]:
    figures = {
        "sent": 0,
        "answered_before": 0,
        "interrupted": 0,
        "post_repeats": 0,
        "post_fresh": 0,
        "put_repeats": 0,
        "put_fresh": 0,
    }
    for tag in range(1, rounds + 1):
        keyed_round(checks, binary, folder, tag, rng, figures)
    records, problem = parse_journal(open(os.path.join(folder, "state-keyed", "state.journal"), "rb").read())
    keys = [k for r in records for k in r.get("keys", [])]
    checks.check(
        "keyed rounds: the journal's keyed records parse with the documented format",
        problem is None and len(keys) > 0,
        f"{len(records)} records, {len(keys)} keys, problem {problem}",
    )
    return figures


# MARK: damaged journals


def seed_journal(binary: str, folder: str, state_dir: str) -> None:
    """A clean journal with a known history: categories, slots set, replaced, emptied."""
    broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="seed.log").start()
    with sl.Conn(broker.socket) as c:
        c.hello("seed")
        c.request("setCategories", categories=category_set(1))
        for i in range(12):
            c.request("put", slot=f"j{i}", value={"v": 1, "i": i, "text": "first" * 20})
        c.request("setCategories", categories=category_set(2))
        for i in range(0, 12, 3):
            c.request("put", slot=f"j{i}", value={"v": 2, "i": i})
        c.request("put", slot="j1", value=None)
        c.request("put", slot="j5", value={"v": 3, "last": True})
    broker.terminate()


def damaged_journal(checks: sl.Checks, binary: str, folder: str, name: str, damage: Any, expect_word: str) -> None:
    state_dir = os.path.join(folder, f"state-{name}")
    seed_journal(binary, folder, state_dir)
    path = os.path.join(state_dir, "state.journal")
    with open(path, "rb") as f:
        original = f.read()
    records, problem = parse_journal(original)
    if not checks.check(
        f"{name}: the seeded journal parses with the documented format",
        problem is None and len(records) >= 16,
        f"{len(records)} records, problem {problem}",
    ):
        return
    damaged, valid_records = damage(original, records)
    with open(path, "wb") as f:
        f.write(damaged)
    want_slots, want_categories = replay(valid_records)
    _, found = parse_journal(damaged)

    broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name=f"{name}.log")
    try:
        broker.start()
    except RuntimeError as exc:
        checks.check(f"{name}: broker starts despite the damaged journal", False, str(exc)[:300])
        return
    log = broker.log()
    checks.check(f"{name}: broker starts despite the damaged journal", broker.alive())
    checks.check(
        f"{name}: the damage is reported on stderr",
        "state journal" in log and expect_word in log,
        " ".join(line for line in log.splitlines() if "journal" in line)[:300] or f"nothing (expected {found})",
    )
    got_slots, got_categories, _ = read_state(broker.socket, [f"j{i}" for i in range(12)])
    checks.check(
        f"{name}: the state is what was valid before the damage",
        got_slots == want_slots and got_categories == (want_categories or []),
        f"{len(valid_records)} of {len(records)} records valid; got {sorted(got_slots)} "
        f"want {sorted(want_slots)}; categories match: {got_categories == (want_categories or [])}",
    )
    aside = glob.glob(path + ".corrupt-*")
    kept = False
    if len(aside) == 1:
        with open(aside[0], "rb") as f:
            kept = f.read() == damaged
    checks.check(f"{name}: the damaged file is kept aside unchanged", kept, f"{[os.path.basename(a) for a in aside]}")
    # The broker goes on with a clean journal: a write now survives another restart, quietly.
    with sl.Conn(broker.socket) as c:
        c.hello()
        c.request("put", slot="after", value={"fresh": name})
    broker.kill()
    broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name=f"{name}-again.log").start()
    again_log = broker.log()
    got_after, _, _ = read_state(broker.socket, ["after"])
    checks.check(
        f"{name}: after recovery the journal is clean and keeps new writes",
        "state journal" not in again_log and got_after == {"after": {"fresh": name}},
        again_log.strip()[:200],
    )
    broker.terminate()


def cut_last_record(data: bytes, records: List[Dict[str, Any]]) -> Tuple[bytes, List[Dict[str, Any]]]:
    last = records[-1]
    return data[: last["offset"] + last["size"] // 2], records[:-1]


def flip_middle_record(data: bytes, records: List[Dict[str, Any]]) -> Tuple[bytes, List[Dict[str, Any]]]:
    i = len(records) // 2
    r = records[i]
    at = r["offset"] + r["size"] // 2
    damaged = bytearray(data)
    for k in range(3):
        damaged[at + k] ^= 0x5A
    return bytes(damaged), records[:i]


def bad_header(data: bytes, records: List[Dict[str, Any]]) -> Tuple[bytes, List[Dict[str, Any]]]:
    return b"NBJRNL99" + data[8:], []


def aside_never_replaces(checks: sl.Checks, binary: str, folder: str) -> None:
    """Files named like earlier set-aside journals (one per second around now) must survive
    a new one being set aside: the name has one-second resolution."""
    state_dir = os.path.join(folder, "state-aside")
    seed_journal(binary, folder, state_dir)
    path = os.path.join(state_dir, "state.journal")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:-5])
    now = int(time.time())
    earlier = {}
    for t in range(now - 1, now + 15):
        earlier[f"{path}.corrupt-{t}"] = f"earlier evidence {t}".encode()
        with open(f"{path}.corrupt-{t}", "wb") as f:
            f.write(earlier[f"{path}.corrupt-{t}"])
    broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="aside.log").start()
    broker.terminate()
    kept = all(open(p, "rb").read() == content for p, content in earlier.items())
    new = [p for p in glob.glob(path + ".corrupt-*") if p not in earlier]
    checks.check(
        "setting a damaged journal aside never replaces an earlier one",
        kept and len(new) == 1,
        f"earlier files intact: {kept}; new: {[os.path.basename(p) for p in new]}; "
        + broker.log().strip().splitlines()[0][-120:],
    )


# MARK: a full disk


def disk_full(checks: sl.Checks, binary: str, folder: str) -> None:
    """The journal's file system fills up: a write that could not be stored must not be
    acknowledged. Needs root to mount a small tmpfs; skipped otherwise."""
    mount_point = os.path.join(folder, "small-fs")
    os.mkdir(mount_point)
    if (
        os.geteuid() != 0
        or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", mount_point], capture_output=True
        ).returncode
        != 0
    ):
        return checks.skip("disk full", "cannot mount a small tmpfs (needs root)")
    try:
        state_dir = os.path.join(mount_point, "state")
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="full.log").start()
        acked, refused = [], []
        with sl.Conn(broker.socket) as c:
            c.hello("filler")
            for i in range(12):  # 12 x 30 kB into 256 kB
                reply = c.request("put", slot=f"f{i}", value="f" * 30_000)
                (acked if "result" in reply else refused).append(f"f{i}")
        log = broker.log()
        checks.check(
            "disk full: the broker stays up and says so on stderr",
            broker.alive() and "No space" in log,
            " ".join(line for line in log.splitlines() if "journal" in line)[:200],
        )
        broker.kill()
        # Room again, so that the restart can compact; then count what survived.
        subprocess.run(["mount", "-o", "remount,size=4m", mount_point], check=True)
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="full-again.log").start()
        got, _, _ = read_state(broker.socket, [f"f{i}" for i in range(12)])
        lost = [name for name in acked if name not in got]
        checks.check(
            "disk full: every acknowledged write survives (none acknowledged that was not stored)",
            not lost,
            f"{len(acked)} acknowledged, {len(refused)} refused; acknowledged but lost: {lost}",
        )
        broker.terminate()
    finally:
        sl.kill_children()
        subprocess.run(["umount", mount_point], capture_output=True)


# MARK: what the wire accepted is read back


def nested(depth: int) -> list:
    """`[[...]]`, `depth` arrays deep."""
    value: list = []
    for _ in range(depth - 1):
        value = [value]
    return value


def launch_payload(tag: str, user_info: Any) -> Dict[str, Any]:
    """A default-action click: with no observer it ends unhandled and is retained in `launch`."""
    return {
        "actionIdentifier": "com.apple.UNNotificationDefaultActionIdentifier",
        "notification": {"identifier": tag, "content": {"title": tag, "userInfo": user_info}},
    }


def deep_values(checks: sl.Checks, binary: str, folder: str) -> None:
    """Values 600 deep, which the wire accepts, come back after SIGKILL and SIGTERM."""
    state_dir = os.path.join(folder, "state-deep")
    deep = nested(600)
    payload = launch_payload("n-deep", {"deep": nested(600)})
    broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="deep.log").start()
    with sl.Conn(broker.socket) as c:
        c.hello("deep")
        put = c.request("put", slot="deep", value=deep)
        post = c.request("post", name="didReceive", payload=payload)
        after = c.request("put", slot="after", value={"later": True})
    checks.check(
        "deep: the wire accepts a 600-deep put and a 600-deep didReceive (retained in launch)",
        "result" in put and "result" in after and post.get("result", {}).get("retained") == "launch",
        f"put {str(put)[:100]}, post retained {post.get('result', {}).get('retained')}",
    )
    for how in ("SIGKILL", "SIGTERM"):
        if how == "SIGKILL":
            broker.kill()
        else:
            broker.terminate()
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name=f"deep-{how}.log").start()
        log = broker.log()
        with sl.Conn(broker.socket) as c:
            c.hello("deep-check")
            got_deep = c.request("peek", slot="deep").get("result")
            got_after = c.request("peek", slot="after").get("result")
            got_launch = c.request("peek", slot="launch").get("result")
        checks.check(
            f"deep: after {how} the journal replays whole (no record refused, nothing set aside)",
            "state journal" not in log and not glob.glob(os.path.join(state_dir, "state.journal.corrupt-*")),
            log.strip()[:200],
        )
        checks.check(
            f"deep: after {how} the 600-deep slot, the later put and the retained launch are back",
            got_deep == deep and got_after == {"later": True} and got_launch == payload,
            f"deep {got_deep == deep}, after {got_after}, launch {got_launch == payload}",
        )
    broker.terminate()


def non_regular_journals(checks: sl.Checks, binary: str, folder: str) -> None:
    """A FIFO, a socket, a device or a symbolic link named state.journal is refused at once."""
    kinds = {
        "fifo": lambda path: os.mkfifo(path, 0o600),
        "socket": lambda path: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).bind(path),
        "symlink": lambda path: os.symlink(os.path.join(os.path.dirname(path), "elsewhere"), path),
    }
    if os.geteuid() == 0:
        kinds["device"] = lambda path: os.mknod(path, 0o600 | stat.S_IFCHR, os.makedev(1, 3))
    else:
        checks.skip("journal as a device", "mknod needs root")
    for kind, make in kinds.items():
        state_dir = os.path.join(folder, f"state-{kind}")
        os.mkdir(state_dir, 0o700)
        path = os.path.join(state_dir, "state.journal")
        make(path)
        broker = sl.Broker(
            binary,
            folder,
            ["--state-dir", state_dir],
            socket_path=os.path.join(folder, f"{kind}.sock"),
            log_name=f"journal-{kind}.log",
        )
        started = time.monotonic()
        broker.start(wait=False)
        rc = broker.wait_exit(5)
        took = time.monotonic() - started
        if rc is None:
            broker.kill()
        log = broker.log().strip()
        checks.check(
            f"a {kind} at the journal's path is refused at once with exit 1 and a clear message",
            rc == 1 and "not a regular file" in log and os.path.lexists(path),
            f"exit {rc} after {took:.2f} s: {log[:160]}",
        )


# MARK: a full disk, and what a refused write leaves


class SmallDisk:
    """A tmpfs of `size` mounted in `folder`; `fill` takes every free byte with a file."""

    def __init__(self, folder: str, name: str, size: str) -> None:
        self.mount_point = os.path.join(folder, name)
        self.filler = os.path.join(self.mount_point, "filler")
        os.mkdir(self.mount_point)
        self.mounted = (
            os.geteuid() == 0
            and subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", self.mount_point], capture_output=True
            ).returncode
            == 0
        )

    def fill(self) -> int:
        written = 0
        with open(self.filler, "ab", buffering=0) as f:
            for chunk in (1 << 16, 4096, 1):
                while True:
                    try:
                        written += f.write(b"\0" * chunk)
                    except OSError:
                        break
        return written

    def free(self) -> None:
        os.remove(self.filler)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", self.mount_point], capture_output=True)


def align_journal(c: sl.Conn, journal: str) -> None:
    """A put that makes the journal end on a page boundary, so that on a full tmpfs even a
    record of a few bytes needs a page there is none of."""
    size = os.path.getsize(journal)
    n = (-(size + 8 + 3 + len("pad") + 2)) % 4096
    c.request("put", slot="pad", value="p" * n)


def refused_writes_change_nothing(checks: sl.Checks, binary: str, folder: str) -> None:
    disk = SmallDisk(folder, "small-fs-take", "1m")
    if not disk.mounted:
        return checks.skip("refused writes change nothing", "cannot mount a small tmpfs (needs root)")
    try:
        state_dir = os.path.join(disk.mount_point, "state")
        journal = os.path.join(state_dir, "state.journal")
        payload = launch_payload("n-full", {"emailId": "e-full"})
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="refused.log").start()
        with sl.Conn(broker.socket) as c, sl.Conn(broker.socket) as waiter:
            c.hello("writer")
            waiter.hello("waiter")
            c.request("put", slot="keep", value={"v": 1})
            c.request("put", slot="x", value="old")
            c.request("put", slot="gone", value="soon")
            retained = c.request("post", name="didReceive", payload=payload).get("result", {}).get("retained")
            align_journal(c, journal)
            filled = disk.fill()
            take = c.request("take", slot="keep")
            take_launch = c.request("take", slot="launch")
            put = c.request("put", slot="x", value="new" * 10_000)
            empty = c.request("put", slot="gone", value=None)
            peeks = {name: c.request("peek", slot=name).get("result") for name in ("keep", "launch", "x", "gone")}
            # A put handed to a waiting take changes nothing on disk: it is delivered.
            waiter.send({"op": "take", "id": "w", "slot": "handoff", "wait": 5000})
            c.request("ping")
            handed = c.request("put", slot="handoff", value={"h": 1})
            got = waiter.reply_to("w")
            code = lambda r: r.get("error", {}).get("code")  # noqa: E731
            checks.check(
                "disk full: take, the take of a retained launch, put and put null are answered storage_failed",
                retained == "launch"
                and [code(take), code(take_launch), code(put), code(empty)] == ["storage_failed"] * 4,
                f"filler {filled} bytes; take {str(take)[:80]}; take launch {str(take_launch)[:80]}; "
                f"put {str(put)[:80]}; put null {str(empty)[:80]}",
            )
            checks.check(
                "disk full: a refused write changes nothing in memory (peek)",
                peeks == {"keep": {"v": 1}, "launch": payload, "x": "old", "gone": "soon"},
                str({k: str(v)[:40] for k, v in peeks.items()}),
            )
            checks.check(
                "disk full: a put handed to a waiting take is still delivered",
                handed.get("result") == {"replaced": False, "delivered": True} and got.get("result") == {"h": 1},
                f"{handed} / {got}",
            )
        broker.kill()
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="refused-again.log")
        disk.free()
        broker.start()
        with sl.Conn(broker.socket) as c:
            c.hello("after")
            restored = {
                name: c.request("peek", slot=name).get("result") for name in ("keep", "launch", "x", "gone", "handoff")
            }
            checks.check(
                "disk full: after SIGKILL the refused take and put null left their values, and the refused put the old one",
                restored == {"keep": {"v": 1}, "launch": payload, "x": "old", "gone": "soon", "handoff": None},
                str({k: str(v)[:40] for k, v in restored.items()}),
            )
            took = c.request("take", slot="keep").get("result")
            took_launch = c.request("take", slot="launch").get("result")
        broker.kill()
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="refused-third.log").start()
        with sl.Conn(broker.socket) as c:
            c.hello("third")
            left = [c.request("peek", slot=name).get("result") for name in ("keep", "launch")]
        checks.check(
            "with room again a take is answered with the value and, after SIGKILL, stays taken",
            took == {"v": 1} and took_launch == payload and left == [None, None],
            f"took {took}, left {left}",
        )
        broker.terminate()
    finally:
        sl.kill_children()
        disk.unmount()


def damaged_journal_on_full_disk(checks: sl.Checks, binary: str, folder: str) -> None:
    """A damaged journal, no room for a fresh one, SIGKILL: the next start still has what
    was valid before the damage (the damaged file is replaced only by a fresh one)."""
    disk = SmallDisk(folder, "small-fs-damaged", "1m")
    if not disk.mounted:
        return checks.skip("damaged journal on a full disk", "cannot mount a small tmpfs (needs root)")
    try:
        state_dir = os.path.join(disk.mount_point, "state")
        seed_journal(binary, folder, state_dir)
        path = os.path.join(state_dir, "state.journal")
        with open(path, "rb") as f:
            original = f.read()
        records, _ = parse_journal(original)
        damaged, valid_records = cut_last_record(original, records)
        with open(path, "wb") as f:
            f.write(damaged)
        want_slots, _ = replay(valid_records)
        names = [f"j{i}" for i in range(12)]
        disk.fill()
        got = []
        for run in ("first", "second"):
            broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name=f"damaged-full-{run}.log")
            try:
                broker.start()
            except RuntimeError as exc:
                got.append(f"did not start: {str(exc)[-160:]}")
                break
            slots, _, _ = read_state(broker.socket, names)
            got.append(slots)
            broker.kill()
        checks.check(
            "damaged journal on a full disk: after SIGKILL the next start still has what was valid",
            got == [want_slots, want_slots],
            f"want {sorted(want_slots)}; got {[sorted(g) if isinstance(g, dict) else g for g in got]}",
        )
        disk.free()
    finally:
        sl.kill_children()
        disk.unmount()


def start_on_full_disk(checks: sl.Checks, binary: str, folder: str) -> None:
    disk = SmallDisk(folder, "small-fs-start", "3m")
    if not disk.mounted:
        return checks.skip("start on a full disk", "cannot mount a small tmpfs (needs root)")
    try:
        state_dir = os.path.join(disk.mount_point, "state")
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="full-start-seed.log").start()
        values = {f"big{i}": f"{i}" * 100_000 for i in range(10)}
        with sl.Conn(broker.socket) as c:
            c.hello("seed")
            for name, value in values.items():
                c.request("put", slot=name, value=value)
        broker.terminate()
        size = os.path.getsize(os.path.join(state_dir, "state.journal"))
        disk.fill()
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="full-start.log")
        try:
            broker.start()
        except RuntimeError as exc:
            checks.check(
                f"full disk: the broker starts from its intact {size // 1024} KiB journal", False, str(exc)[-200:]
            )
            return
        with sl.Conn(broker.socket) as c:
            c.hello("full")
            got = {name: c.request("peek", slot=name).get("result") for name in values}
            refused = [
                c.request("put", slot=f"new{i}", value="n" * 50_000).get("error", {}).get("code") for i in range(3)
            ]
            disk.free()
            stored = c.request("put", slot="new", value="n" * 50_000)
            compacted_now = c.request("put", slot="new2", value="m" * 10)
        log = broker.log()
        warnings = [line for line in log.splitlines() if "compaction" in line]
        checks.check(
            f"full disk: the broker starts from its intact {size // 1024} KiB journal",
            got == values,
            f"{sum(1 for n in values if got.get(n) == values[n])} of {len(values)} slots back",
        )
        checks.check(
            "full disk: compaction is postponed with one warning", len(warnings) == 1, " | ".join(warnings)[:300]
        )
        checks.check(
            "full disk: writes are storage_failed while full and stored again once there is room, without a restart",
            refused == ["storage_failed"] * 3 and "result" in stored and "result" in compacted_now,
            f"while full {refused}; after freeing {str(stored)[:80]}",
        )
        broker.kill()
        broker = sl.Broker(binary, folder, ["--state-dir", state_dir], log_name="full-start-again.log").start()
        with sl.Conn(broker.socket) as c:
            c.hello("again")
            back = c.request("peek", slot="new").get("result")
            old = c.request("peek", slot="big3").get("result")
        checks.check(
            "full disk: the write stored after freeing space survives SIGKILL",
            back == "n" * 50_000 and old == values["big3"],
            broker.log().strip()[:200],
        )
        broker.terminate()
    finally:
        sl.kill_children()
        disk.unmount()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="SIGKILL rounds (default 5)")
    parser.add_argument("--keyed-rounds", type=int, default=5, help="SIGKILL rounds with idempotency keys (default 5)")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else int(time.time())
    sl.install_signal_cleanup()
    rng = random.Random(seed)
    checks = sl.Checks("durability")
    folder = sl.fresh_folder("nb-dur-")
    binary = sl.snapshot_binary(folder)
    print(f"durability: {args.rounds} SIGKILL rounds, seed {seed}", flush=True)
    figures = kill_rounds(checks, binary, folder, args.rounds, rng)
    keyed = keyed_rounds(checks, binary, folder, args.keyed_rounds, rng)
    damaged_journal(checks, binary, folder, "truncated", cut_last_record, "truncated")
    damaged_journal(checks, binary, folder, "corrupt", flip_middle_record, "checksum")
    damaged_journal(checks, binary, folder, "bad-header", bad_header, "header")
    aside_never_replaces(checks, binary, folder)
    disk_full(checks, binary, folder)
    deep_values(checks, binary, folder)
    non_regular_journals(checks, binary, folder)
    refused_writes_change_nothing(checks, binary, folder)
    damaged_journal_on_full_disk(checks, binary, folder)
    start_on_full_disk(checks, binary, folder)
    print()
    print(
        f"rounds {figures['rounds']}: {figures['sent']} writes sent, {figures['acked']} acknowledged "
        f"({figures['large']} large), {figures['unacked_landed']} unacknowledged writes also landed, "
        f"{figures['torn_tails']} torn tails after SIGKILL"
    )
    print(
        f"keyed rounds {args.keyed_rounds}: {keyed['sent']} keyed requests sent, {keyed['answered_before']} answered "
        f"before the kill; after it, posts: {keyed['post_repeats']} repeats, {keyed['interrupted']} interrupted, "
        f"{keyed['post_fresh']} applied as new; puts: {keyed['put_repeats']} repeats, {keyed['put_fresh']} applied as new"
    )
    again = f"--rounds {args.rounds} --keyed-rounds {args.keyed_rounds} --seed {seed}"
    return sl.finish_run(checks, folder, binary, kept="state folders and logs", again=again)


if __name__ == "__main__":
    sys.exit(main())
