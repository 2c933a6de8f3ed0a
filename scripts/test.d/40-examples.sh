#!/usr/bin/env bash
# Runs each example script and checks the story it prints.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/check-output.sh
run_example ChainDemo 60 Examples/ChainDemo/run.sh
check "observer o3 on willPresent at priority 20, replacing o2"
check "observer o2 evicted by o3"
check "story: o1 said next, o3 said complete; the event was completed by o3, presenting with [\"banner\", \"sound\"]"
check '"retained":"launch"'
check 'asking again gives: null'
echo "ChainDemo: ok"
