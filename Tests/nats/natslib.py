"""What the NATS bridge's end-to-end tests share: processes they start, kill and start again
(a broker, a bridge, nats-server nodes), JetStream calls retried while the cluster elects
leaders, reading an outbound subject, and a raw observer that counts every event it sees and
keeps each frame's bytes. Every wait is bounded. Python 3, nats-py, standard library.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import socket
import struct
import subprocess
import threading
import time
import urllib.request
from typing import Callable, Dict, List, Optional

from nats.js.errors import APIError

#: What failed so far, in the order `check` saw it.
FAILURES: List[str] = []


def bin_urls_work_args():
    """The command line of a test that starts its own brokers and bridges on a running cluster."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--bin", required=True, help="the folder of the notifbus binaries")
    parser.add_argument("--urls", required=True)
    parser.add_argument("--work", required=True)
    return parser.parse_args()


def check(condition: bool, what: str) -> None:
    print(("ok: " if condition else "FAIL: ") + what, flush=True)
    if not condition:
        FAILURES.append(what)


async def jetstream_state(js, stream: str, consumers: List[str], subjects: str) -> str:
    """What a check about a work queue needs when it fails, as text: the stream as its leader
    sees it (messages, first and last sequence, the messages on `subjects` with their
    sequences and ids), each consumer as its leader sees it (pending, ack pending,
    redelivered, delivered and ack floor), then each node's own copy of the stream and the
    consumers (from its monitoring port, $NATS_MONITOR_URLS), replicas included: a replica
    that kept a message the others removed shows there; last, what each node warned of
    about the stream (in $NATS_CLUSTER_DIR), such as a replica resetting its copy."""
    lines: List[str] = []
    try:
        info = await js.stream_info(stream, subjects_filter=subjects)
        st = info.state
        leader = info.cluster.leader if info.cluster else None
        replicas = ", ".join(
            f"{p.name} {'current' if p.current else 'behind'} lag {p.lag or 0}"
            for p in ((info.cluster.replicas if info.cluster else None) or [])
        )
        lines.append(
            f"stream {stream} (leader {leader}; {replicas}): {st.messages} messages, seq {st.first_seq}..{st.last_seq}, "
            f"{st.num_deleted or 0} deleted; on {subjects}: {dict(st.subjects or {})}"
        )
        seq, shown = st.first_seq, 0
        while st.subjects and shown < 12:
            try:
                m = await js.get_msg(stream, seq=seq, subject=subjects, next=True)
            except Exception:
                break
            lines.append(f"  seq {m.seq} {m.subject} {(m.headers or {}).get('Nats-Msg-Id')} {m.data[:40]!r}")
            seq, shown = m.seq + 1, shown + 1
    except Exception as error:
        lines.append(f"stream {stream}: no answer ({error!r})")
    for name in consumers:
        try:
            ci = await js.consumer_info(stream, name)
            lines.append(
                f"consumer {name} (leader {ci.cluster.leader if ci.cluster else None}): "
                f"pending {ci.num_pending}, ack pending {ci.num_ack_pending}, redelivered {ci.num_redelivered}, "
                f"waiting {ci.num_waiting}, delivered {ci.delivered.consumer_seq}/{ci.delivered.stream_seq}, "
                f"ack floor {ci.ack_floor.consumer_seq}/{ci.ack_floor.stream_seq}"
            )
        except Exception as error:
            lines.append(f"consumer {name}: no answer ({error!r})")
    for url in filter(None, os.environ.get("NATS_MONITOR_URLS", "").split(",")):
        lines.extend(await asyncio.to_thread(_node_state, url, stream))
    folder = os.environ.get("NATS_CLUSTER_DIR")
    for node in sorted(os.listdir(folder)) if folder and os.path.isdir(folder) else []:
        try:
            with open(os.path.join(folder, node, "log"), errors="replace") as log:
                warned = [line.rstrip() for line in log if ("[WRN]" in line or "[ERR]" in line) and stream in line]
        except OSError:
            continue
        lines.append(f"{node} warned {len(warned)} times about {stream}" + (", the last ones:" if warned else ""))
        lines.extend("  " + line for line in warned[-6:])
    return "\n".join("   " + line for line in lines)


def stream_copies(stream: str) -> List[Optional[tuple]]:
    """Each node's own copy of `stream`, from its monitoring port ($NATS_MONITOR_URLS): its
    messages, first and last sequence (None for a node that does not answer or holds no copy).
    A follower's copy lags its leader's by what it has not applied yet, removals included."""
    urls = [url for url in os.environ.get("NATS_MONITOR_URLS", "").split(",") if url]
    if not urls:
        raise RuntimeError("NATS_MONITOR_URLS is not set (scripts/lib/nats-cluster.sh sets it)")
    copies: List[Optional[tuple]] = []
    for url in urls:
        try:
            _, details = _stream_details(url, stream, consumers=False)
        except Exception:
            details = []
        state = details[0].get("state") or {} if details else None
        copies.append((state.get("messages"), state.get("first_seq"), state.get("last_seq")) if state else None)
    return copies


def _stream_details(url: str, stream: str, consumers: bool) -> tuple:
    """A node's meta leader and its /jsz details of its copy of `stream` (none or one)."""
    query = "/jsz?accounts=true&streams=true" + ("&consumers=true" if consumers else "")
    with urllib.request.urlopen(url + query, timeout=5) as answer:
        jsz = json.load(answer)
    details = [
        detail
        for account in jsz.get("account_details") or []
        for detail in account.get("stream_detail") or []
        if detail.get("name") == stream
    ]
    return (jsz.get("meta_cluster") or {}).get("leader"), details


def _node_state(url: str, stream: str) -> List[str]:
    """One node's own copy of `stream` and its consumers, from its /jsz. A follower's consumer
    figures are what it last applied, so they may lag its leader's."""
    try:
        meta_leader, details = _stream_details(url, stream, consumers=True)
    except Exception as error:
        return [f"{url}: no answer ({error!r})"]
    lines = []
    for detail in details:
        st = detail.get("state") or {}
        lines.append(
            f"{url} (stream leader {(detail.get('cluster') or {}).get('leader')}, meta leader {meta_leader}): "
            f"{st.get('messages')} messages, seq {st.get('first_seq')}..{st.get('last_seq')}, "
            f"{st.get('num_deleted', 0)} deleted"
        )
        for c in detail.get("consumer_detail") or []:
            lines.append(
                f"  consumer {c.get('name')} (leader {(c.get('cluster') or {}).get('leader')}): "
                f"pending {c.get('num_pending')}, ack pending {c.get('num_ack_pending')}, "
                f"redelivered {c.get('num_redelivered')}, delivered {c['delivered']['consumer_seq']}/"
                f"{c['delivered']['stream_seq']}, ack floor {c['ack_floor']['consumer_seq']}/"
                f"{c['ack_floor']['stream_seq']}"
            )
    return lines or [f"{url}: no stream {stream}"]


class Process:
    """A program the test starts, SIGKILLs and starts again (a broker, a bridge, a node)."""

    def __init__(self, command: List[str], log: str) -> None:
        self.command = command
        self.log_path = log
        self.log = open(log, "ab")
        self.process: Optional[subprocess.Popen] = None

    def start(self) -> None:
        self.process = subprocess.Popen(self.command, stdout=self.log, stderr=self.log)

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def kill(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)

    def log_text(self) -> str:
        self.log.flush()
        with open(self.log_path, "rb") as f:
            return f.read().decode(errors="replace")


#: JetStream's error for a publish past a subject's limit (discard new per subject).
MAX_PER_SUBJECT_EXCEEDED = 10077


async def publish(js, subject: str, body: bytes, msg_id: Optional[str], bound: float = 60):
    """Publishes to JetStream, retrying (same id, so deduplicated) while a leader is elected.
    Returns the publish ack (its `seq` is the stream sequence). A refusal for the subject's
    limit is the stream's answer, not an election, and is raised at once: sent again while
    the subject's device drains it, the post could part the copies of the stream on
    nats-server 2.9.10 (Protocol/NATS.md §7)."""
    headers = {"Nats-Msg-Id": msg_id} if msg_id else None
    deadline = time.monotonic() + bound
    while True:
        try:
            return await js.publish(subject, body, headers=headers, timeout=2)
        except APIError as error:
            if error.err_code == MAX_PER_SUBJECT_EXCEEDED or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


async def retried(make, bound: float = 60):
    """Runs a JetStream API call again while the cluster elects leaders after a node kill."""
    deadline = time.monotonic() + bound
    while True:
        try:
            return await make()
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.5)


async def read_subject(js, stream: str, subject: str, want: int, bound: float, settle: float = 2.0) -> list:
    """Every message of `stream` on `subject`: waits (bounded) for `want`, then `settle` seconds
    more so that duplicates would show."""
    sub = await retried(lambda: js.pull_subscribe(subject, stream=stream))
    got: list = []
    deadline = time.monotonic() + bound
    quiet_until = None
    while time.monotonic() < deadline:
        try:
            msgs = await sub.fetch(200, timeout=1)
        except Exception:
            msgs = []
        for m in msgs:
            got.append(m)
            await m.ack()
        if len(got) >= want:
            if quiet_until is None:
                quiet_until = time.monotonic() + settle
            elif time.monotonic() > quiet_until and not msgs:
                break
    await sub.unsubscribe()
    return got


async def wait_until(predicate: Callable[[], bool], bound: float) -> bool:
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if predicate():
            return True
        await asyncio.sleep(0.05)
    return predicate()


class RawObserver:
    """An observer of `event` on a raw connection: it counts every event by the `n` of its
    payload, keeps the frames' bytes for those that ask, takes `delay` seconds over each, and
    answers `complete` with `{"shown": n}`. It connects again when the broker restarts."""

    def __init__(
        self, socket_path: str, event: str, delay: float = 0.0, keep: Callable[[bytes], bool] = lambda b: False
    ) -> None:
        self.path = socket_path
        self.event = event
        self.delay = delay
        self.keep = keep
        self.lock = threading.Lock()
        self.seen: Dict[int, int] = {}
        self.times: List[tuple] = []
        self.kept: List[bytes] = []
        self.foreign = 0
        self.ready = threading.Event()
        self.stopped = False
        threading.Thread(target=self._run, daemon=True).start()

    def count(self) -> int:
        with self.lock:
            return len(self.seen)

    def counts(self) -> Dict[int, int]:
        with self.lock:
            return dict(self.seen)

    def stop(self) -> None:
        self.stopped = True

    def _run(self) -> None:
        while not self.stopped:
            try:
                self._serve()
            except (OSError, ConnectionError, ValueError):
                pass
            self.ready.clear()
            time.sleep(0.1)

    def _serve(self) -> None:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(5)
            s.connect(self.path)
            s.settimeout(None)

            def send(message: dict) -> None:
                body = json.dumps(message).encode()
                s.sendall(struct.pack(">I", len(body)) + body)

            send({"op": "hello", "id": 1, "protocol": 1, "name": "nats-test-observer"})
            send({"op": "subscribe", "id": 2, "events": [self.event], "priority": 10})
            buffer = bytearray()
            while not self.stopped:
                while len(buffer) < 4 or len(buffer) < 4 + struct.unpack(">I", buffer[:4])[0]:
                    chunk = s.recv(1 << 20)
                    if not chunk:
                        raise ConnectionError("the broker closed the connection")
                    buffer += chunk
                size = struct.unpack(">I", buffer[:4])[0]
                raw = bytes(buffer[4 : 4 + size])
                del buffer[: 4 + size]
                frame = json.loads(raw)
                if frame.get("op") == "reply" and frame.get("id") == 2:
                    self.ready.set()
                if frame.get("op") != "event":
                    continue
                payload = frame.get("payload")
                n = payload.get("n") if isinstance(payload, dict) else None
                with self.lock:
                    if isinstance(n, int):
                        self.seen[n] = self.seen.get(n, 0) + 1
                        self.times.append((time.monotonic(), n))
                    else:
                        self.foreign += 1
                    if self.keep(raw):
                        self.kept.append(raw)
                if self.delay:
                    time.sleep(self.delay)
                send({"op": "complete", "event": frame["event"], "value": {"shown": n}})


class SmallDisk:
    """A tmpfs of `size` mounted at `path` (needs root); `fill` takes every free byte."""

    def __init__(self, path: str, size: str) -> None:
        self.path = path
        self.filler = os.path.join(path, "filler")
        os.makedirs(path, exist_ok=True)
        self.mounted = (
            os.geteuid() == 0
            and subprocess.run(
                ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", path], capture_output=True
            ).returncode
            == 0
        )

    def fill(self) -> None:
        with open(self.filler, "ab", buffering=0) as f:
            for chunk in (1 << 16, 4096, 1):
                while True:
                    try:
                        f.write(b"\0" * chunk)
                    except OSError:
                        break

    def free(self) -> None:
        if os.path.exists(self.filler):
            os.remove(self.filler)

    def unmount(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", self.path], capture_output=True)
