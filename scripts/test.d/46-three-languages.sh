#!/usr/bin/env bash
# Runs Examples/ThreeLanguages/run.sh and checks the story it prints: one willPresent passes
# through a Swift, a Python and a JavaScript observer, and the JavaScript one completes it.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/check-output.sh
run_example ThreeLanguages 60 Examples/ThreeLanguages/run.sh
check '[swift] {"event":1,"name":"willPresent","observer":"o1","payload":{"notification":'
check '[python] python observer o2 saw willPresent event 1: title "Ana", body "Lunch on Friday?"; answering next'
check '[js] js observer o3 saw willPresent event 1: title "Ana", thread "chat-ana"; completing with ["banner","sound"]'
check '"trace":[{"observer":"o1","reply":"next"},{"observer":"o2","reply":"next"},{"observer":"o3","reply":"complete"}],"value":["banner","sound"]'
check 'story: o1 (Swift) said next, o2 (Python) said next, o3 (JavaScript) said complete; the event was completed by o3, presenting with ["banner", "sound"]'
check "==> Done"
echo "ThreeLanguages: ok"
