#!/usr/bin/env bash
# The NATS bridge against a real 3-node nats-server cluster with JetStream (R3 streams):
# 1,000 posts through a node kill and a bridge kill (exactly once), puts, invokes, --export,
# dead letters, a broker outage and a whole-cluster outage. Everything lives in a temporary
# folder and is stopped on exit, even on failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/nats-cluster.sh

BIN=$(swift build --show-bin-path)
for tool in notifbus notifbus-bridge; do
    [ -x "$BIN/$tool" ] || { echo "56-nats: $BIN/$tool is missing (swift build first)"; exit 1; }
done
python3 -c "import nats" 2>/dev/null || { echo "56-nats: nats-py is missing (scripts/setup.sh installs it)"; exit 1; }

WORK=$(mktemp -d)
cleanup() {
    nats_cluster_stop
    rm -rf "$WORK"
}
trap cleanup EXIT

# Ports in an unusual range: clients 14222-14224, routes 16222-16224.
nats_cluster_start "$WORK/nats" 14222 16222

BROKER=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \
    "$BIN/notifbus" broker --socket "$WORK/bus.sock" --state-dir "$WORK/broker-state" --call-timeout 1s)

BRIDGE=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \
    "$BIN/notifbus" bridge nats --url "$NATS_URLS" --device dev1 --socket "$WORK/bus.sock" \
    --create-stream --replicas 3 --state-dir "$WORK/bridge-state" --ack-wait 3s --export didReceive)

status=0
PYTHONPATH=Clients/python/src timeout 420 python3 Tests/nats/bridge_test.py \
    --socket "$WORK/bus.sock" --urls "$NATS_URLS" --bridge "$BRIDGE" --bridge-log "$WORK/bridge.log" \
    --node-pids "n1=${NATS_PIDS[1]},n2=${NATS_PIDS[2]},n3=${NATS_PIDS[3]}" --nats-dir "$WORK/nats" \
    --broker "$BROKER" || status=$?
if [ $status -ne 0 ]; then
    echo "--- bridge log"; tail -n 60 "$WORK/bridge.log"
    echo "--- broker log"; tail -n 20 "$WORK/bridge.log.broker"
    exit 1
fi
echo "--- bridge log (tail)"; tail -n 8 "$WORK/bridge.log"
echo "56-nats: ok"
