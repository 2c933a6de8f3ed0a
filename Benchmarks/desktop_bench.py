"""Time from `add` on the `notifications` channel to the notification on the desktop's
server: the add call returns once the server answered Notify, so its round trip covers the
willPresent chain, getCategories, Notify and the way back. Prints the median of N adds
(and quartiles) for dunst on Xvfb and for python-dbusmock, each on a private session bus.

    python3 Benchmarks/desktop_bench.py [--count 100] [--server dunst|mock|both]

Uses the desktop tests' harness (Tests/desktop) to start the bus, servers, broker and bridge.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "Tests" / "desktop"))

from conftest import INVITE, MESSAGE, Desktop, notification  # noqa: E402
from test_dunst import RealDesktop  # noqa: E402


def measure(desktop: Desktop, count: int) -> list:
    desktop.start_broker()
    desktop.client().set_notification_categories([MESSAGE, INVITE])
    desktop.start_bridge()
    channel = desktop.channel()
    samples = []
    for i in range(count + 5):
        n = notification(f"bench-{i}", "MESSAGE", userInfo={"i": i})
        start = time.perf_counter()
        result = channel.invoke_method("add", n)
        elapsed = time.perf_counter() - start
        assert result["presented"] and result["desktopId"], result
        channel.invoke_method("removeDeliveredNotifications", {"identifiers": [n["identifier"]]})
        if i >= 5:  # the first few warm up the connections and the server
            samples.append(elapsed * 1000)
    return samples


def report(name: str, samples: list) -> None:
    q = statistics.quantiles(samples, n=4)
    print(
        f"{name}: add -> on the server, median {statistics.median(samples):.2f} ms over {len(samples)} "
        f"(p25 {q[0]:.2f}, p75 {q[2]:.2f}, min {min(samples):.2f}, max {max(samples):.2f})"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--server", choices=["dunst", "mock", "both"], default="both")
    args = parser.parse_args()
    for server in ["dunst", "mock"] if args.server == "both" else [args.server]:
        folder = tempfile.mkdtemp(prefix="nbb-", dir="/tmp")
        d = RealDesktop(folder) if server == "dunst" else Desktop(folder)
        try:
            if server == "dunst":
                d.start_dunst()
            else:
                d.start_server("actions body inline-reply")
            report(
                "dunst 1.9 on Xvfb" if server == "dunst" else "python-dbusmock notification_daemon",
                measure(d, args.count),
            )
        finally:
            d.close()
            shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
