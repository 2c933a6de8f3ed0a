#!/usr/bin/env python3
"""Plays messages.json against a live notifbus broker and reports each case.

It starts the broker binary on a socket in a fresh temporary folder, plays every case on
a fresh connection, stops the broker with SIGTERM and prints `N passed, N failed` as its
last line; the exit status is 1 when any case failed or the broker could not be run.
Every wait is bounded by --timeout. Python 3 standard library only.

    python3 Protocol/vectors/play_messages.py [--broker PATH] [--only TEXT] [--verbose]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
DEFAULT_BROKER = HERE.parent.parent / ".build" / "debug" / "notifbus"
HELLO_ID = "h"
PROBE_ID = "probe"


class CaseFailure(Exception):
    """The broker did not do what the case expects."""


def same_json(a: Any, b: Any) -> bool:
    """JSON equality that tells 1 from 1.0, true from 1, and null from absent."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, float) or isinstance(b, float):
        return type(a) is type(b) and a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same_json(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same_json(a[k], b[k]) for k in a)
    return False


def show(value: Any, limit: int = 300) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[:limit] + "..."


class Connection:
    """One client socket with a frame reader whose every wait ends by a deadline."""

    def __init__(self, path: str, timeout: float) -> None:
        self.timeout = timeout
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buffer = b""
        self.eof = False

    def close(self) -> None:
        self.sock.close()

    def send_body(self, body: bytes) -> None:
        self.sock.sendall(len(body).to_bytes(4, "big") + body)

    def send(self, message: Dict[str, Any]) -> None:
        self.send_body(json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))

    def _fill(self, deadline: float) -> None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise CaseFailure(f"no complete frame within {self.timeout} s")
        self.sock.settimeout(remaining)
        try:
            chunk = self.sock.recv(65536)
        except socket.timeout:
            raise CaseFailure(f"no complete frame within {self.timeout} s") from None
        except ConnectionResetError:
            chunk = b""
        if not chunk:
            self.eof = True
        self.buffer += chunk

    def read_frame(self) -> Optional[Dict[str, Any]]:
        """The next frame, or None at end of stream (with nothing left over)."""
        deadline = time.monotonic() + self.timeout
        while True:
            if len(self.buffer) >= 4:
                n = int.from_bytes(self.buffer[:4], "big")
                if len(self.buffer) >= 4 + n:
                    body, self.buffer = self.buffer[4 : 4 + n], self.buffer[4 + n :]
                    try:
                        value = json.loads(body.decode("utf-8"))
                    except (UnicodeDecodeError, ValueError) as exc:
                        raise CaseFailure(f"the broker sent a body that is not JSON: {exc}") from None
                    if not isinstance(value, dict):
                        raise CaseFailure(f"the broker sent a frame that is not an object: {show(value)}")
                    return value
            if self.eof:
                if self.buffer:
                    raise CaseFailure(f"connection closed inside a frame ({len(self.buffer)} bytes left)")
                return None
            self._fill(deadline)

    def read_reply(self) -> Dict[str, Any]:
        """The next reply frame; `seen` frames (this connection may be a monitor) are skipped."""
        while True:
            frame = self.read_frame()
            if frame is None:
                raise CaseFailure("connection closed before the reply")
            if frame.get("op") == "seen":
                continue
            if frame.get("op") != "reply":
                raise CaseFailure(f"expected a reply, got {show(frame)}")
            check_reply_shape(frame)
            return frame


def check_reply_shape(frame: Dict[str, Any]) -> None:
    keys = set(frame)
    if keys not in ({"op", "id", "result"}, {"op", "id", "error"}):
        raise CaseFailure(f"a reply carries op, id and exactly one of result and error: {show(frame)}")
    if "error" in frame:
        err = frame["error"]
        if not isinstance(err, dict) or not {"code", "message"} <= set(err) <= {"code", "message", "details"}:
            raise CaseFailure(f"malformed error object: {show(frame)}")
        if not isinstance(err["code"], str) or not isinstance(err["message"], str):
            raise CaseFailure(f"error code and message must be strings: {show(frame)}")


def encode_case(case: Dict[str, Any]) -> bytes:
    if "send" in case:
        return json.dumps(case["send"], separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return case["sendText"].encode("utf-8")


def play(case: Dict[str, Any], path: str, timeout: float) -> None:
    conn = Connection(path, timeout)
    try:
        greeted = bool(case["greeted"])
        if greeted:
            conn.send({"op": "hello", "id": HELLO_ID, "protocol": 1})
            hello = conn.read_reply()
            if not same_json(hello["id"], HELLO_ID) or "result" not in hello or hello["result"].get("protocol") != 1:
                raise CaseFailure(f"hello failed: {show(hello)}")
        conn.send_body(encode_case(case))
        reply = conn.read_reply()
        expect = case["expect"]
        if not same_json(reply["id"], expect["id"]):
            raise CaseFailure(f"expected id {show(expect['id'])}, got {show(reply)}")
        if "error" in expect:
            if "error" not in reply:
                raise CaseFailure(f"expected error {expect['error']}, got {show(reply)}")
            if reply["error"]["code"] != expect["error"]:
                raise CaseFailure(f"expected error {expect['error']}, got {show(reply)}")
        else:
            if "result" not in reply:
                raise CaseFailure(f"expected result {show(expect['result'])}, got {show(reply)}")
            if not same_json(reply["result"], expect["result"]):
                raise CaseFailure(f"expected result {show(expect['result'])}, got {show(reply)}")
        if case["closes"]:
            frame = conn.read_frame()
            if frame is not None:
                raise CaseFailure(f"expected the connection to close, got {show(frame)}")
        else:
            probe_open(conn, greeted)
    finally:
        conn.close()


def probe_open(conn: Connection, greeted: bool) -> None:
    """Shows that the connection is still usable: hello where it is still ungreeted, ping otherwise."""
    try:
        if greeted:
            conn.send({"op": "ping", "id": PROBE_ID})
        else:
            conn.send({"op": "hello", "id": PROBE_ID, "protocol": 1})
    except OSError as exc:
        raise CaseFailure(f"the connection did not stay open: {exc}") from None
    try:
        reply = conn.read_reply()
    except CaseFailure as exc:
        raise CaseFailure(f"the connection did not stay open: {exc}") from None
    if not same_json(reply["id"], PROBE_ID) or "result" not in reply:
        what = "ping" if greeted else "hello (the connection should still be ungreeted)"
        raise CaseFailure(f"after the case, {what} got {show(reply)}")


class Broker:
    """The broker process on a socket in a fresh temporary folder."""

    def __init__(self, binary: Path, timeout: float) -> None:
        self.folder = tempfile.mkdtemp(prefix="notifbus-vectors-")
        self.path = os.path.join(self.folder, "s")
        self.stderr_path = os.path.join(self.folder, "stderr")
        self.stderr = open(self.stderr_path, "wb")
        self.process = subprocess.Popen(
            [str(binary), "broker", "--socket", self.path],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=self.stderr,
        )
        deadline = time.monotonic() + timeout
        while b"listening on" not in self.log():
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"the broker exited with status {self.process.returncode}: {self.log().decode(errors='replace')}"
                )
            if time.monotonic() > deadline:
                self.stop(timeout)
                raise RuntimeError(f"the broker did not print its readiness line within {timeout} s")
            time.sleep(0.02)

    def log(self) -> bytes:
        with open(self.stderr_path, "rb") as f:
            return f.read()

    def stop(self, timeout: float) -> Optional[int]:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=timeout)
        self.stderr.close()
        shutil.rmtree(self.folder, ignore_errors=True)
        return self.process.returncode


def main() -> int:
    parser = argparse.ArgumentParser(description="Play messages.json against a live notifbus broker.")
    parser.add_argument("--broker", type=Path, default=DEFAULT_BROKER, help=f"broker binary (default {DEFAULT_BROKER})")
    parser.add_argument("--vectors", type=Path, default=HERE / "messages.json", help="vector file")
    parser.add_argument("--timeout", type=float, default=5.0, help="seconds any one wait may take (default 5)")
    parser.add_argument("--only", default=None, help="play only the cases whose name contains this text")
    parser.add_argument("--verbose", "-v", action="store_true", help="print passing cases too")
    args = parser.parse_args()

    cases: List[Dict[str, Any]] = json.loads(args.vectors.read_text(encoding="utf-8"))["cases"]
    if args.only:
        cases = [c for c in cases if args.only in c["name"]]
    if not args.broker.exists():
        print(f"no broker binary at {args.broker} (build it with: swift build --product notifbus)")
        print(f"0 passed, {len(cases)} failed")
        return 1
    try:
        broker = Broker(args.broker, args.timeout)
    except (OSError, RuntimeError) as exc:
        print(f"could not start the broker: {exc}")
        print(f"0 passed, {len(cases)} failed")
        return 1

    passed = failed = 0
    try:
        for case in cases:
            try:
                play(case, broker.path, args.timeout)
            except (CaseFailure, OSError) as exc:
                failed += 1
                print(f"FAIL {case['name']}: {exc}")
                continue
            passed += 1
            if args.verbose:
                print(f"ok   {case['name']}")
    finally:
        status = broker.stop(args.timeout)
    if status not in (0, None):
        print(f"the broker exited with status {status} after SIGTERM")
        failed += 1
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
