#!/usr/bin/env bash
# Push: a mail server reaches a device over NATS. A 3-node NATS cluster runs on loopback;
# the device runs a broker, the NATS bridge and a mail app observer. The server pushes a
# notification, the device's chain shows it, the user clicks, and the click goes back.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/../../scripts/lib/nats-cluster.sh"
# Every part first, each missing one named in one line (nats-cluster.sh has added
# /usr/sbin, where Debian puts nats-server, to PATH).
BRIDGE=$(dirname "$NOTIFBUS_BIN")/notifbus-bridge
[ -x "$BRIDGE" ] || { echo "example: $BRIDGE is not built; run 'swift build' first" >&2; exit 1; }
command -v nats-server >/dev/null || { echo "example: needs nats-server (Debian: sudo apt-get install nats-server)" >&2; exit 1; }
python3 -c "import nats" 2>/dev/null || {
    echo "example: needs nats-py: run scripts/setup.sh (it installs it into .build/venv), or see Examples/Push/README.md" >&2
    exit 1
}
# The device's processes go first, then the cluster, then the folder.
trap 'for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; nats_cluster_stop; cleanup' EXIT

say "A NATS cluster of 3 nodes (JetStream) on loopback"
nats_cluster_start "$WORK/nats" 18222 19222
echo "    $NATS_URLS"

say "The device 'laptop': a broker, the NATS bridge, and the mail app"
start_broker
echo "    \$ notifbus bridge nats --url ... --device laptop --layout per-device --create-stream --replicas 3 --export didReceive"
"$NOTIFBUS_BIN" bridge nats --url "$NATS_URLS" --device laptop --layout per-device --create-stream --replicas 3 \
    --export didReceive 2> >(tag bridge >&2) &
PIDS+=($!)
for _ in $(seq 1 100); do
    nb status 2>/dev/null | grep -q "notifbus-bridge" && break
    sleep 0.1
done
echo '[{"identifier":"MESSAGE","actions":[{"identifier":"REPLY","title":"Reply","textInput":{"buttonTitle":"Send"}}]}]' |
    nb categories set - >/dev/null
# The mail app shows new mail as a banner with sound, and opens the mail on a click.
start mail-app observe willPresent --priority 10 --reply complete --value '["banner","sound"]' --name mail-app
start mail-app observe didReceive --priority 10 --reply complete --value '{"opened":true}' --name mail-app-clicks
sleep 0.5

say "The server pushes a new mail to the device"
PYTHONPATH="$HERE/../../Clients/python-server/src${PYTHONPATH:+:$PYTHONPATH}" python3 -u "$HERE/server.py" --urls "$NATS_URLS" --device laptop 2>&1 | tee "$WORK/server.log" | tag server &
SERVER=$!
PIDS+=($SERVER)
for _ in $(seq 1 300); do
    grep -q "the device's chain" "$WORK/server.log" 2>/dev/null && break
    sleep 0.1
done

say "The user clicks the notification on the device; the bridge exports the click to the server"
echo "    \$ notifbus click --id mail-42 --category MESSAGE --user-info '{\"emailId\":\"e-42\"}'"
nb click --id mail-42 --category MESSAGE --title "Ana Lima" --user-info '{"emailId":"e-42"}' | sed 's/^/    /'
for _ in $(seq 1 300); do kill -0 "$SERVER" 2>/dev/null || break; sleep 0.1; done
wait "$SERVER"
