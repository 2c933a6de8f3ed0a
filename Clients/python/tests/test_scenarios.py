"""Plays the multi-connection scenarios of Protocol/vectors/scenarios/ against the broker.

Each scenario gets its own broker (started by conftest's ``make_broker``) and its own raw
sockets; the format is described at the end of Protocol/README.md. The player below speaks
frames directly, without the client library, so that it checks the wire and nothing else.
Every wait is bounded.
"""

from __future__ import annotations

import json
import select
import socket
import time
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

import pytest

from samples import same_json

SCENARIOS = Path(__file__).resolve().parents[3] / "Protocol" / "vectors" / "scenarios"

#: How long an `expect` or `expectClosed` waits unless the step gives `timeout`.
DEFAULT_TIMEOUT_MS = 2000


class ScenarioFailure(AssertionError):
    """The broker did not do what the scenario says."""


def load_scenarios() -> List[Dict[str, Any]]:
    """Every scenario of every file, in file order; a file holds one object or a list."""
    found: List[Dict[str, Any]] = []
    for path in sorted(SCENARIOS.glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        found.extend(data if isinstance(data, list) else [data])
    return found


def show(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


class Conn:
    """One raw client socket and the bytes read from it but not yet decoded."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(DEFAULT_TIMEOUT_MS / 1000)
        self.sock.connect(path)
        self.buffer = b""
        self.eof = False
        self.client: Optional[str] = None

    def send(self, frame: Any) -> None:
        body = json.dumps(frame, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self.sock.sendall(len(body).to_bytes(4, "big") + body)

    def _decode(self) -> Optional[Dict[str, Any]]:
        """A complete frame from the buffer, if one is there."""
        if len(self.buffer) < 4:
            return None
        n = int.from_bytes(self.buffer[:4], "big")
        if len(self.buffer) < 4 + n:
            return None
        body, self.buffer = self.buffer[4 : 4 + n], self.buffer[4 + n :]
        return json.loads(body.decode("utf-8"))

    def read(self, timeout_ms: float) -> Any:
        """The next frame; "closed" at end of stream; "timeout" when nothing came in time."""
        deadline = time.monotonic() + timeout_ms / 1000
        while True:
            frame = self._decode()
            if frame is not None:
                return frame
            if self.eof:
                return "closed"
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self.sock], [], [], left)[0]:
                return "timeout"
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                chunk = b""
            if not chunk:
                self.eof = True
            self.buffer += chunk


class Player:
    """Runs one scenario's steps against a broker listening on `path`."""

    def __init__(self, scenario: Dict[str, Any], path: str) -> None:
        self.scenario = scenario
        self.path = path
        self.conns: Dict[str, Conn] = {}

    def fail(self, index: int, step: Any, why: str) -> None:
        raise ScenarioFailure(f"{self.scenario['name']}: step {index} {show(step)}: {why}")

    def substitute(self, value: Any) -> Any:
        """Replaces "$client:NAME" with that connection's client id, everywhere in `value`."""
        if isinstance(value, str) and value.startswith("$client:"):
            name = value[len("$client:") :]
            client = self.conns[name].client if name in self.conns else None
            if client is None:
                raise ScenarioFailure(f"{self.scenario['name']}: no client id for {value}")
            return client
        if isinstance(value, list):
            return [self.substitute(v) for v in value]
        if isinstance(value, dict):
            return {k: self.substitute(v) for k, v in value.items()}
        return value

    def matches(self, expected: Any, actual: Any, subset: bool) -> bool:
        """Whether `actual` fits `expected`: "$any" fits any value; subset skips unlisted keys."""
        if expected == "$any":
            return True
        if isinstance(expected, dict):
            if not isinstance(actual, dict):
                return False
            if not subset and expected.keys() != actual.keys():
                return False
            return all(k in actual and self.matches(v, actual[k], subset) for k, v in expected.items())
        if isinstance(expected, list):
            return (
                isinstance(actual, list)
                and len(expected) == len(actual)
                and all(self.matches(e, a, subset) for e, a in zip(expected, actual))
            )
        return same_json(self.substitute(expected), actual)

    def connect_all(self) -> None:
        """Connects in the listed order; each hello is answered before the next connect."""
        for entry in self.scenario["connections"]:
            name, greet = (entry, True) if isinstance(entry, str) else (entry["name"], entry.get("hello", True))
            conn = Conn(self.path)
            self.conns[name] = conn
            if not (greet and self.scenario.get("hello", True)):
                continue
            conn.send({"op": "hello", "id": "hello", "protocol": 1, "name": name})
            reply = conn.read(DEFAULT_TIMEOUT_MS)
            shape = {
                "op": "reply",
                "id": "hello",
                "result": {"protocol": 1, "server": "$any", "client": "$any", "maxFrame": "$any"},
            }
            if not self.matches(shape, reply, False) or not isinstance(reply["result"]["client"], str):
                raise ScenarioFailure(f"{self.scenario['name']}: hello of {name} got {show(reply)}")
            conn.client = reply["result"]["client"]

    def run(self) -> None:
        self.connect_all()
        try:
            for index, step in enumerate(self.scenario["steps"]):
                self.step(index, step)
        finally:
            for conn in self.conns.values():
                conn.sock.close()

    def step(self, index: int, step: Dict[str, Any]) -> None:
        timeout = step.get("timeout", DEFAULT_TIMEOUT_MS)
        if "send" in step:
            self.conns[step["send"]].send(self.substitute(step["frame"]))
        elif "expect" in step:
            got = self.conns[step["expect"]].read(timeout)
            if isinstance(got, str):
                self.fail(index, step, f"got no frame ({got} after {timeout} ms)")
            if not self.matches(step["frame"], got, step.get("match", "exact") == "subset"):
                self.fail(index, step, f"got {show(got)}")
        elif "expectNothing" in step:
            got = self.conns[step["expectNothing"]].read(step["within"])
            if got != "timeout":
                self.fail(index, step, f"got {show(got)}")
        elif "expectClosed" in step:
            got = self.conns[step["expectClosed"]].read(timeout)
            if got != "closed":
                self.fail(index, step, f"expected end of stream, got {show(got)}")
        elif "close" in step:
            self.conns[step["close"]].sock.close()
        elif "sleep" in step:
            time.sleep(step["sleep"] / 1000)
        else:
            self.fail(index, step, "unknown step")


def broker_args(flags: List[str]) -> Dict[str, Any]:
    """conftest's Broker takes the two timeouts apart; the contract's 30 s defaults otherwise."""
    args: Dict[str, Any] = {"hop_timeout": "30s", "call_timeout": "30s", "extra": []}
    i = 0
    while i < len(flags):
        if flags[i] in ("--hop-timeout", "--call-timeout") and i + 1 < len(flags):
            args["hop_timeout" if flags[i] == "--hop-timeout" else "call_timeout"] = flags[i + 1]
            i += 2
        else:
            args["extra"].append(flags[i])
            i += 1
    return args


ALL = load_scenarios()


def test_scenarios_exist() -> None:
    names = [s["name"] for s in ALL]
    assert len(names) >= 12 and len(set(names)) == len(names)


@pytest.mark.parametrize("scenario", ALL, ids=[s["name"] for s in ALL])
def test_scenario(scenario: Dict[str, Any], make_broker: Callable[..., Any]) -> None:
    broker = make_broker(**broker_args(scenario.get("broker", [])))
    Player(scenario, broker.socket).run()
