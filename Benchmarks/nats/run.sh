#!/usr/bin/env bash
# Runs the NATS bridge benchmark: a 3-node JetStream cluster on loopback (clients 15222-15224,
# routes 17222-17224), a broker, the bridge, then notifbus-nats-bench, which prints the numbers.
# Usage: Benchmarks/nats/run.sh [debug|release] [bench flags...]. Everything is stopped on exit.
# BRIDGE_FLAGS adds bridge options; BRIDGE_WRAP runs the bridge under a tool (valgrind ...);
# BROKER_FLAGS replaces the broker's `--state-dir DIR` (BROKER_FLAGS= runs it without one:
# its idempotency keys then live in memory, and no keyed post waits for the disk).
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/nats-cluster.sh
CONFIG=${1:-release}
shift || true
swift build -c "$CONFIG" --product notifbus >/dev/null
swift build -c "$CONFIG" --product notifbus-bridge >/dev/null
swift build -c "$CONFIG" --product notifbus-nats-bench >/dev/null
BIN=$(swift build -c "$CONFIG" --show-bin-path)

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    local pid
    for pid in "${PIDS[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    nats_cluster_stop
    # With NOTIFBUS_BRIDGE_PROFILE=1 the bridge logged where its inbound thread's time went.
    grep -h "profile," "$WORK/bridge.log" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

nats_cluster_start "$WORK/nats" 15222 17222
BROKER_FLAGS=${BROKER_FLAGS---state-dir $WORK/broker-state}
"$BIN/notifbus" broker --socket "$WORK/bus.sock" $BROKER_FLAGS 2>"$WORK/broker.log" &
PIDS+=($!)
for _ in $(seq 100); do [ -S "$WORK/bus.sock" ] && break; sleep 0.1; done
${BRIDGE_WRAP:-} "$BIN/notifbus-bridge" nats --url "$NATS_URLS" --device bench --socket "$WORK/bus.sock" \
    --layout per-device --create-stream --replicas 3 ${BRIDGE_FLAGS:-} 2>"$WORK/bridge.log" &
PIDS+=($!)
for _ in $(seq 150); do grep -q "bridging device" "$WORK/bridge.log" && break; sleep 0.2; done
grep -q "bridging device" "$WORK/bridge.log" || { echo "the bridge did not start"; cat "$WORK/bridge.log"; exit 1; }
# The bench reports each phase's CPU time per message for these processes.
export NOTIFBUS_BENCH_PIDS="nats1=${NATS_PIDS[1]},nats2=${NATS_PIDS[2]},nats3=${NATS_PIDS[3]},broker=${PIDS[0]},bridge=${PIDS[1]}"
echo "build: $CONFIG; $(nproc) cores; nats-server $(nats-server --version | sed 's/.*v//')"
timeout 600 "$BIN/notifbus-nats-bench" --url "$NATS_URLS" --device bench --socket "$WORK/bus.sock" --replicas 3 "$@"
