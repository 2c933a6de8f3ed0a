#!/usr/bin/env bash
# Proves the benchmark works: a release build of the broker and the harness, then a short
# run (a few seconds) that prints every row. It asserts nothing about times.
set -euo pipefail
cd "$(dirname "$0")/../.."
swift build -c release --product notifbus
swift build -c release --product notifbus-bench
timeout 300 .build/release/notifbus-bench --broker .build/release/notifbus --quick
# Clients that outlive the broker: readiness line -> a post walks a 100-observer chain again.
timeout 120 python3 Benchmarks/restart.py --restarts 6 --broker-bin .build/release/notifbus
