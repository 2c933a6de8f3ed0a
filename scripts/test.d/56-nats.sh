#!/usr/bin/env bash
# The NATS bridge against real 3-node nats-server clusters with JetStream (R3 streams): first
# 1,000 posts through a node kill and a bridge kill, puts, invokes, --export, dead letters, a
# broker outage and a whole-cluster outage (Tests/nats/bridge_test.py); then, on a fresh
# cluster, exactly once where it has been broken: oversized posts, the broker's disk full
# under a group, refusals through bridge kills, a restart without waiting out AckWait, and
# 2,000 posts through 10 bridge kills, 2 node kills and a full disk
# (Tests/nats/exactly_once_test.py; NOTIFBUS_STRESS_SEED replays its random moments); then, on
# a third cluster, the servers' side: `notifbus push` and notifbus_server (Tests/nats/push_test.py).
# These run the per-device layout. Last, on a fourth cluster (one cluster holds one layout:
# their outbound subjects overlap), the shared layout: two devices on one stream, its
# per-subject limit, a device offline while posts arrive, and `notifbus push --layout shared`
# and notifbus_server with layout="shared" (Tests/nats/shared_test.py). Then, on a fifth
# cluster, leader changes: the consumer's leader stepped down while a bridge applies and acks,
# every acked message gone from the work queue well before AckWait (Tests/nats/stepdown_test.py).
# Everything lives in a temporary folder and is stopped on exit, even on failure.
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
    # The small disks of the full-disk checks, if a check could not unmount its own.
    awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts | xargs -r umount -l 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT
export PYTHONPATH=Clients/python/src:Clients/python-server/src:Tests/nats

# Ports in an unusual range: clients 14222-14224, routes 16222-16224 (and each cluster's
# monitoring at its client ports + 10000, read when a check fails).
nats_cluster_start "$WORK/nats" 14222 16222

BROKER=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \
    "$BIN/notifbus" broker --socket "$WORK/bus.sock" --state-dir "$WORK/broker-state" --call-timeout 1s)

BRIDGE=$(python3 -c 'import json, sys; print(json.dumps(sys.argv[1:]))' \
    "$BIN/notifbus" bridge nats --url "$NATS_URLS" --device dev1 --socket "$WORK/bus.sock" \
    --layout per-device --create-stream --replicas 3 --ack-wait 3s --export didReceive)

status=0
timeout 420 python3 Tests/nats/bridge_test.py \
    --socket "$WORK/bus.sock" --urls "$NATS_URLS" --bridge "$BRIDGE" --bridge-log "$WORK/bridge.log" \
    --node-pids "n1=${NATS_PIDS[1]},n2=${NATS_PIDS[2]},n3=${NATS_PIDS[3]}" --nats-dir "$WORK/nats" \
    --broker "$BROKER" || status=$?
if [ $status -ne 0 ]; then
    echo "--- bridge log"; tail -n 60 "$WORK/bridge.log"
    echo "--- broker log"; tail -n 20 "$WORK/bridge.log.broker"
    exit 1
fi
echo "--- bridge log (tail)"; tail -n 8 "$WORK/bridge.log"
nats_cluster_stop

# A fresh cluster: clients 14232-14234, routes 16232-16234.
nats_cluster_start "$WORK/nats2" 14232 16232
mkdir -p "$WORK/once"
timeout 900 python3 Tests/nats/exactly_once_test.py --bin "$BIN" --urls "$NATS_URLS" --nats-dir "$WORK/nats2" \
    --node-pids "n1=${NATS_PIDS[1]},n2=${NATS_PIDS[2]},n3=${NATS_PIDS[3]}" --work "$WORK/once" \
    ${NOTIFBUS_STRESS_SEED:+--seed "$NOTIFBUS_STRESS_SEED"}
nats_cluster_stop

# The servers' side on a cluster of its own (the one above lost nodes on purpose): clients
# 14242-14244, routes 16242-16244.
nats_cluster_start "$WORK/nats3" 14242 16242
timeout 300 python3 Tests/nats/push_test.py --bin "$BIN" --urls "$NATS_URLS" --work "$WORK/push"
nats_cluster_stop

# The shared layout: clients 14252-14254, routes 16252-16254.
nats_cluster_start "$WORK/nats4" 14252 16252
mkdir -p "$WORK/shared"
timeout 300 python3 Tests/nats/shared_test.py --bin "$BIN" --urls "$NATS_URLS" --work "$WORK/shared"
nats_cluster_stop

# Leader changes, on a cluster of its own: clients 14262-14264, routes 16262-16264.
nats_cluster_start "$WORK/nats5" 14262 16262
mkdir -p "$WORK/stepdown"
timeout 300 python3 Tests/nats/stepdown_test.py --bin "$BIN" --urls "$NATS_URLS" --work "$WORK/stepdown"
echo "56-nats: ok"
