"""Shared pieces of the stress programs: the broker under test as a child process, raw
frame I/O on Unix sockets, /proc figures, and a list of named checks.

It speaks the wire protocol directly (no client library) so that the programs can also
send what a client library never would. Every wait here is bounded by a timeout, and every
child started through it is killed when the program ends.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import re
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

REPO_ROOT = Path(__file__).resolve().parents[2]

#: Longest a broker may take to print its readiness line.
STARTUP_LIMIT = 15.0
#: The spec gives the broker 2 s to exit after SIGTERM; allow scheduling slack on top.
SHUTDOWN_LIMIT = 4.0

_children: List[subprocess.Popen] = []
_children_lock = threading.Lock()


def track(process: subprocess.Popen) -> subprocess.Popen:
    """Remember a child so that it is killed (by its pid) when the program ends."""
    with _children_lock:
        _children.append(process)
    return process


def kill_children() -> None:
    """SIGKILL every tracked child that is still running, and reap it."""
    with _children_lock:
        children = list(_children)
        _children.clear()
    for process in children:
        if process.poll() is None:
            try:
                process.kill()
            except OSError:
                pass
    for process in children:
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


atexit.register(kill_children)


def _terminate(signum: int, _frame: Any) -> None:
    kill_children()
    sys.exit(128 + signum)


def install_signal_cleanup() -> None:
    """SIGTERM/SIGINT of the test program still kill its children (CI `timeout` sends TERM)."""
    signal.signal(signal.SIGTERM, _terminate)
    signal.signal(signal.SIGINT, _terminate)


# MARK: the broker binary


def broker_binary() -> Path:
    configured = os.environ.get("NOTIFBUS_BIN")
    path = Path(configured) if configured else REPO_ROOT / ".build" / "debug" / "notifbus"
    if not path.is_absolute():
        path = REPO_ROOT / path
    return path


def snapshot_binary(folder: str) -> str:
    """Copy the broker into `folder`, so that a rebuild during the run does not swap it
    under us (its libraries are found through an absolute RUNPATH)."""
    source = broker_binary()
    if not source.is_file():
        raise SystemExit(f"broker binary {source} not found: run `swift build` or set NOTIFBUS_BIN")
    target = os.path.join(folder, "notifbus")
    shutil.copy2(source, target)
    os.chmod(target, 0o755)
    return target


def fresh_folder(prefix: str) -> str:
    """A new folder under /tmp; short, because socket paths are limited to 107 bytes."""
    return tempfile.mkdtemp(prefix=prefix, dir="/tmp")


# MARK: /proc figures


def proc_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


def proc_status_kib(pid: int, field: str) -> int:
    """A `kB` field of /proc/PID/status, such as VmRSS (resident now) or VmHWM (peak)."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise KeyError(field)


class RSSSampler:
    """Samples a process's VmRSS every `interval` seconds in a thread; keeps the peak."""

    def __init__(self, pid: int, interval: float = 0.1) -> None:
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                rss = proc_status_kib(self.pid, "VmRSS")
            except (OSError, KeyError, ValueError):
                return
            self.peak_kib = max(self.peak_kib, rss)
            self.samples += 1
            self._stop.wait(self.interval)

    def stop(self) -> int:
        self._stop.set()
        self._thread.join(timeout=2)
        return self.peak_kib


class Broker:
    """One `notifbus broker` child on a socket in `folder`, its stderr in a file there."""

    def __init__(
        self,
        binary: str,
        folder: str,
        args: Sequence[str] = (),
        socket_path: Optional[str] = None,
        env: Optional[Dict[str, str]] = None,
        log_name: str = "broker.log",
        preexec: Optional[Callable[[], None]] = None,
    ) -> None:
        self.binary = binary
        self.folder = folder
        self.socket = socket_path if socket_path is not None else os.path.join(folder, "bus.sock")
        self.args = list(args)
        self.env = env
        self.log_path = os.path.join(folder, log_name)
        self.preexec = preexec
        self.process: Optional[subprocess.Popen] = None
        self._log_offset = 0

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def command(self, with_socket: bool = True) -> List[str]:
        return [self.binary, "broker", *(["--socket", self.socket] if with_socket else []), *self.args]

    def start(self, with_socket: bool = True, wait: bool = True) -> "Broker":
        log = open(self.log_path, "ab")
        self._log_offset = log.tell()
        self.process = track(
            subprocess.Popen(
                self.command(with_socket),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                env=self.env,
                preexec_fn=self.preexec,
            )
        )
        log.close()
        if wait:
            self.wait_ready()
        return self

    def log(self) -> str:
        """What the broker printed since this start."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(self._log_offset)
                return f.read().decode("utf-8", "replace")
        except OSError:
            return ""

    def wait_ready(self, timeout: float = STARTUP_LIMIT) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if "notifbus: listening on" in self.log():
                return
            if self.process is not None and self.process.poll() is not None:
                raise RuntimeError(f"broker exited with {self.process.returncode} at start:\n{self.log()}")
            time.sleep(0.02)
        raise RuntimeError(f"broker did not become ready within {timeout} s:\n{self.log()}")

    def wait_exit(self, timeout: float) -> Optional[int]:
        assert self.process is not None
        try:
            return self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def terminate(self, timeout: float = SHUTDOWN_LIMIT) -> Optional[int]:
        """SIGTERM; the exit status, or None (and a SIGKILL) if it did not exit in time."""
        if not self.alive():
            return self.process.returncode if self.process else None
        self.process.send_signal(signal.SIGTERM)
        rc = self.wait_exit(timeout)
        if rc is None:
            self.process.kill()
            self.process.wait(timeout=5)
        return rc

    def kill(self) -> None:
        if self.alive():
            self.process.kill()
            self.process.wait(timeout=5)

    def fds(self) -> int:
        return proc_fds(self.pid)

    def rss_kib(self) -> int:
        return proc_status_kib(self.pid, "VmRSS")

    def hwm_kib(self) -> int:
        return proc_status_kib(self.pid, "VmHWM")

    def wait_fds(self, target: int, timeout: float) -> int:
        """Waits until the broker holds `target` descriptors or fewer; returns the count."""
        deadline = time.monotonic() + timeout
        while True:
            n = self.fds()
            if n <= target or time.monotonic() >= deadline:
                return n
            time.sleep(0.05)


# MARK: frames


def encode(message: Dict[str, Any]) -> bytes:
    body = json.dumps(message, separators=(",", ":")).encode()
    return struct.pack(">I", len(body)) + body


def raw_frame(body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + body


class Closed(Exception):
    """The broker closed the connection."""


class Timeout(Exception):
    """Nothing (or not the expected frame) arrived in time."""


class Conn:
    """A blocking client connection with bounded waits; frames are dicts."""

    def __init__(self, path: str, timeout: float = 5.0, connect: bool = True) -> None:
        self.path = path
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.buffer = bytearray()
        self.next_id = 1
        self.unsolicited: List[Dict[str, Any]] = []
        self.eof = False
        self.client_id: Optional[str] = None
        if connect:
            self.sock.settimeout(timeout)
            self.sock.connect(path)

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self) -> "Conn":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def send(self, message: Dict[str, Any]) -> None:
        self.send_raw(encode(message))

    def send_raw(self, data: bytes) -> None:
        self.sock.settimeout(self.timeout)
        self.sock.sendall(data)

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise Timeout("no frame in time")
        self.sock.settimeout(remaining)
        try:
            data = self.sock.recv(1 << 20)
        except socket.timeout:
            raise Timeout("no frame in time") from None
        except ConnectionResetError:
            data = b""
        if not data:
            self.eof = True
            raise Closed("connection closed by the broker")
        self.buffer += data

    def recv(self, timeout: Optional[float] = None) -> Dict[str, Any]:
        """The next frame; Closed at EOF, Timeout if none comes in time."""
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            if len(self.buffer) >= 4:
                n = struct.unpack(">I", self.buffer[:4])[0]
                if len(self.buffer) >= 4 + n:
                    body = bytes(self.buffer[4 : 4 + n])
                    del self.buffer[: 4 + n]
                    return json.loads(body)
            self._fill(deadline)

    def request(self, op: str, timeout: Optional[float] = None, **fields: Any) -> Dict[str, Any]:
        """Sends a request and returns its reply; other frames go to `unsolicited`."""
        rid = self.next_id
        self.next_id += 1
        self.send({"op": op, "id": rid, **fields})
        return self.reply_to(rid, timeout)

    def reply_to(self, rid: Any, timeout: Optional[float] = None) -> Dict[str, Any]:
        deadline = time.monotonic() + (self.timeout if timeout is None else timeout)
        while True:
            frame = self.recv(max(0.0, deadline - time.monotonic()))
            if frame.get("op") == "reply" and frame.get("id") == rid:
                return frame
            self.unsolicited.append(frame)

    def hello(self, name: Optional[str] = None) -> Dict[str, Any]:
        fields: Dict[str, Any] = {"protocol": 1}
        if name is not None:
            fields["name"] = name
        reply = self.request("hello", **fields)
        if "result" in reply:
            self.client_id = reply["result"]["client"]
        return reply

    def expect_eof(self, timeout: float = 3.0) -> bool:
        """Reads and drops frames until EOF; False if the connection stays open."""
        deadline = time.monotonic() + timeout
        try:
            while True:
                self.recv(max(0.0, deadline - time.monotonic()))
        except Closed:
            return True
        except Timeout:
            return False


def full_status(c: "Conn", timeout: Optional[float] = None, max_pages: int = 100_000) -> Dict[str, Any]:
    """The whole `status`: its pages asked for in turn (decision 31), the lists joined and
    the figures of the last page; {} when a page is an error."""
    whole: Dict[str, Any] = {}
    fields: Dict[str, Any] = {}
    for _ in range(max_pages):
        page = c.request("status", timeout, **fields).get("result")
        if not isinstance(page, dict):
            return {}
        merged = dict(page)
        for name in ("clients", "observers", "handlers", "slots"):
            merged[name] = list(whole.get(name, [])) + list(page.get(name, []))
        whole = merged
        if page.get("next") is None:
            return whole
        fields = {"page": page["next"]}
    raise Timeout(f"status did not end within {max_pages} pages")


def peer_hung_up(sock: socket.socket, timeout: float = 0.0) -> bool:
    """Whether the broker closed this socket, told without reading a byte of it."""
    poller = select.poll()
    poller.register(sock, select.POLLRDHUP | select.POLLHUP)
    for _fd, events in poller.poll(int(timeout * 1000)):
        if events & (select.POLLHUP | select.POLLRDHUP):
            return True
    return False


def error_code(reply: Dict[str, Any]) -> Optional[str]:
    error = reply.get("error")
    return error.get("code") if isinstance(error, dict) else None


def log_count(text: str, word: str) -> int:
    """How many log lines containing `word` the broker wrote or counted: it writes at most
    one line of a kind a second, and such a line ends "(N more like it ...)" for the ones
    it held back."""
    total = 0
    for line in text.splitlines():
        if word in line:
            match = re.search(r"\((\d+) more like it", line)
            total += 1 + (int(match.group(1)) if match else 0)
    return total


def wait_until(predicate: Callable[[], bool], timeout: float, interval: float = 0.05) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval)


# MARK: checks


class Checks:
    """Named pass/fail results; `report` prints them and gives the exit status."""

    def __init__(self, title: str) -> None:
        self.title = title
        self.results: List[tuple] = []

    def check(self, name: str, ok: bool, detail: str = "") -> bool:
        self.results.append((name, bool(ok), detail))
        mark = "ok  " if ok else "FAIL"
        print(f"  [{mark}] {name}" + (f": {detail}" if detail else ""), flush=True)
        return bool(ok)

    def skip(self, name: str, why: str) -> None:
        print(f"  [skip] {name}: {why}", flush=True)

    @property
    def failed(self) -> List[tuple]:
        return [r for r in self.results if not r[1]]

    def report(self) -> int:
        failed = self.failed
        print(f"{self.title}: {len(self.results) - len(failed)} checks passed, {len(failed)} failed", flush=True)
        for name, _ok, detail in failed:
            print(f"  failed: {name}" + (f" ({detail})" if detail else ""), flush=True)
        return 1 if failed else 0


def run_checks(
    title: str,
    doc: str,
    prefix: str,
    named: Sequence[Tuple[str, Callable[[Checks, Any], None]]],
    context: Callable[[str, str], Any],
) -> int:
    """The main program of a checks file: `-k WORD` picks the checks whose name contains
    WORD; each runs in turn with `context(folder, binary)` (a fresh folder and a snapshot
    of the broker), and one that raises is a failed check, not a crash. The children of
    each are killed after it. Returns the exit status; the folder is removed when every
    check passed, else kept for its broker logs."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("-k", dest="only", default="", help="run only the checks whose name contains this")
    args = parser.parse_args()
    install_signal_cleanup()
    folder = fresh_folder(prefix)
    binary = snapshot_binary(folder)
    ctx = context(folder, binary)
    checks = Checks(title)
    for name, fn in named:
        if args.only not in name:
            continue
        print(f"{name}:", flush=True)
        started = time.monotonic()
        try:
            fn(checks, ctx)
        except Exception as exc:  # a check that blows up is a failed check, not a crash
            checks.check(f"{name} ran to the end", False, repr(exc)[:300])
        kill_children()
        print(f"  ({time.monotonic() - started:.1f} s)", flush=True)
    return finish_run(checks, folder, binary)


def finish_run(checks: "Checks", folder: str, binary: str, kept: str = "broker logs", again: str = "") -> int:
    """Prints the report and returns the exit status; the run's folder goes when every
    check passed, and is kept (without the broker's copy of the binary) otherwise, with
    `again`, the arguments that run the same again (its seed), printed beside it."""
    code = checks.report()
    if code == 0:
        shutil.rmtree(folder, ignore_errors=True)
    else:
        os.remove(binary)
        print(f"({kept} kept in {folder}{'; the same run again: ' + again if again else ''})")
    return code


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"
