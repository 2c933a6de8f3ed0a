#!/usr/bin/env bash
# Runs the Push example (a server reaches a device over a 3-node NATS cluster) and checks its
# story: the push reaches the device's chain, the result and the click go back to the server.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/check-output.sh
run_example Push 120 Examples/Push/run.sh
check "[server] pushed mail e-42 to device laptop"
check '"name":"willPresent","observer":'
check "[server] the device's chain: completed by o"
check "presentation ['banner', 'sound']"
check "didReceive default on mail-42: handled by"
check "[server] click from device laptop: com.apple.UNNotificationDefaultActionIdentifier on e-42; marking e-42 as read"
echo "Push: ok"
