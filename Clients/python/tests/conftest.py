"""Shared test fixtures: the package on sys.path, a real broker per test, a time bound.

Tests run against the built ``notifbus`` binary: ``NOTIFBUS_BIN``, else
``.build/debug/notifbus`` at the repository root. Nothing here fakes the broker.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable, Iterator, List, Optional

import pytest

PACKAGE_ROOT = Path(__file__).resolve().parents[1]
REPO_ROOT = PACKAGE_ROOT.parents[1]
sys.path.insert(0, str(PACKAGE_ROOT / "src"))

#: Longest a single test may run before it is failed.
TEST_TIME_LIMIT = 60.0

#: Longest a broker may take to accept connections after it starts.
STARTUP_LIMIT = 15.0

#: Longest a broker may take to exit after SIGTERM (the spec allows 2 s).
SHUTDOWN_LIMIT = 5.0


def broker_binary() -> Path:
    """The broker under test."""
    configured = os.environ.get("NOTIFBUS_BIN")
    return Path(configured) if configured else REPO_ROOT / ".build" / "debug" / "notifbus"


class Broker:
    """One ``notifbus broker`` process on a socket in a fresh temporary folder."""

    def __init__(self, hop_timeout: str = "5s", call_timeout: str = "5s", extra: Optional[List[str]] = None):
        binary = broker_binary()
        if not binary.is_file():
            pytest.fail(f"broker binary {binary} not found: run `swift build --product notifbus` or set NOTIFBUS_BIN")
        # Unix socket paths are limited to ~107 bytes: keep the folder short.
        self.folder = tempfile.mkdtemp(prefix="nb-", dir="/tmp")
        self.socket = os.path.join(self.folder, "bus.sock")
        self.log_path = os.path.join(self.folder, "broker.log")
        self._log = open(self.log_path, "wb")
        command = [
            str(binary),
            "broker",
            "--socket",
            self.socket,
            "--hop-timeout",
            hop_timeout,
            "--call-timeout",
            call_timeout,
            *(extra or []),
        ]
        self.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + STARTUP_LIMIT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"broker exited with {self.process.returncode} at start:\n{self.log()}")
            probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                probe.settimeout(1.0)
                probe.connect(self.socket)
                return
            except OSError:
                time.sleep(0.02)
            finally:
                probe.close()
        self.stop()
        pytest.fail(f"broker not accepting on {self.socket} after {STARTUP_LIMIT} s:\n{self.log()}")

    def log(self) -> str:
        """Everything the broker wrote to stdout and stderr so far."""
        with open(self.log_path, "rb") as handle:
            return handle.read().decode("utf-8", "replace")

    def kill(self) -> None:
        """SIGKILL the broker, as a crash would."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait(SHUTDOWN_LIMIT)

    def terminate(self) -> None:
        """SIGTERM the broker without waiting for it."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)

    def stop(self) -> Optional[int]:
        """SIGTERM the broker, SIGKILL it if it lingers; return its exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(SHUTDOWN_LIMIT)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(SHUTDOWN_LIMIT)
        self._log.close()
        return self.process.returncode

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.folder, ignore_errors=True)


@pytest.fixture
def make_broker() -> Iterator[Callable[..., Broker]]:
    """Start brokers with chosen flags; all are stopped after the test."""
    started: List[Broker] = []

    def start(hop_timeout: str = "5s", call_timeout: str = "5s", extra: Optional[List[str]] = None) -> Broker:
        broker = Broker(hop_timeout, call_timeout, extra)
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.cleanup()


@pytest.fixture
def broker(make_broker: Callable[..., Broker]) -> Broker:
    """A broker with 5 s hop and call timeouts."""
    return make_broker()


class TimeLimitExceeded(Exception):
    """A test ran past TEST_TIME_LIMIT."""


@pytest.fixture(autouse=True)
def time_limit() -> Iterator[None]:
    """Fail any test that runs longer than TEST_TIME_LIMIT, wherever it is stuck."""

    def expire(signum: int, frame: object) -> None:
        raise TimeLimitExceeded(f"test ran longer than {TEST_TIME_LIMIT} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, TEST_TIME_LIMIT)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
