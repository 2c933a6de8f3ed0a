#!/usr/bin/env bash
# One chain, three languages: a Swift observer (the notifbus CLI, built on NotifBusClient)
# at priority 10, a Python one (Clients/python) at 20 and a JavaScript one (Clients/js) at
# 30 share one willPresent event. Each prints what it saw; the JavaScript one completes it.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"

say "Starting the broker on $NOTIFBUS_SOCKET"
# The Python observer imports the client as an installed package; this puts the checkout's
# copy on the path instead of running pip install ./Clients/python.
export PYTHONPATH="$HERE/../../Clients/python/src${PYTHONPATH:+:$PYTHONPATH}"
start_broker --hop-timeout 5s

say "Swift observer (priority 10): notifbus observe, which passes every willPresent on"
start_logged swift "$WORK/swift.log" "$NOTIFBUS_BIN" observe willPresent --priority 10 --name swift-observer --reply next
observers=("${PIDS[-1]}")
wait_status "swift-observer"
wait_log "observer o1 on willPresent" "$WORK/swift.log"

say "Python observer (priority 20): looks at the event and passes it on"
start_logged python "$WORK/python.log" python3 "$HERE/python_observer.py" --priority 20 --run-for 120
observers+=("${PIDS[-1]}")
wait_log "python observer o2 on willPresent" "$WORK/python.log"

say "JavaScript observer (priority 30): decides how to present it"
start_logged js "$WORK/js.log" node "$HERE/js_observer.mjs" --priority 30 --run-for 120 --present '["banner","sound"]'
observers+=("${PIDS[-1]}")
wait_log "js observer o3 on willPresent" "$WORK/js.log"

say "The chain as the broker sees it"
nb status | sed 's/^/    /'

say "A message arrives while the app is in the foreground: post willPresent"
payload='{"notification":{"identifier":"msg-7","source":"remote","content":{"title":"Ana","body":"Lunch on Friday?","threadIdentifier":"chat-ana"}}}'
echo "    post willPresent $payload"
result=$(nb post willPresent "$payload" --timeout 20s)
wait_log '"event":1' "$WORK/swift.log"
wait_log "python observer o2 saw willPresent event 1" "$WORK/python.log"
wait_log "js observer o3 saw willPresent event 1" "$WORK/js.log"
echo "    result: $result"
nb status --json | python3 -c '
import json, sys
status = json.load(sys.stdin)
result = json.loads(sys.argv[1])
names = {c["client"]: c["name"] for c in status["clients"]}
owners = {o["observer"]: names.get(o["client"]) for o in status["observers"]}
languages = {"swift-observer": "Swift", "python-observer": "Python", "js-observer": "JavaScript"}
hops = ", ".join("%s (%s) said %s" % (h["observer"], languages.get(owners.get(h["observer"]), "?"), h["reply"])
                 for h in result["trace"])
print("    story: %s; the event was %s by %s, presenting with %s"
      % (hops, result["outcome"], result["by"], json.dumps(result["value"])))' "$result"

say "The observers leave"
for pid in "${observers[@]}"; do stop_pid "$pid"; done
wait_status_gone "willPresent"
say "Done"
