#!/usr/bin/env bash
# The shared notification delegate across processes: three observer processes on one
# chain, one replaced by a newer copy with the same key, and a poster. Prints the story.
set -euo pipefail
source "$(dirname "$0")/../lib.sh"

say "Starting the broker on $NOTIFBUS_SOCKET"
start_broker --hop-timeout 2s

say "Observer 'analytics' (priority 10) looks at every willPresent and passes it on"
start analytics observe willPresent --priority 10 --name analytics --reply next
wait_status "analytics"

say "Observer 'chat-plugin v1' (priority 20, key chat-presenter) would show an alert"
start chat-v1 observe willPresent --priority 20 --key chat-presenter --name chat-plugin-v1 --reply complete --value '["alert"]'
wait_status "chat-plugin-v1"

say "Observer 'chat-plugin v2' takes the same key: the broker evicts v1"
start chat-v2 observe willPresent --priority 20 --key chat-presenter --name chat-plugin-v2 --reply complete --value '["banner","sound"]'
wait_status "chat-plugin-v2"
sleep 0.2

say "The chain as the broker sees it"
nb status | sed 's/^/    /'

say "A chat message arrives in the foreground: post willPresent"
result=$(nb post willPresent '{"notification":{"identifier":"msg-1","source":"remote","content":{"title":"Ana","body":"Lunch?","threadIdentifier":"chat-ana"}}}')
echo "    result: $result"
echo "$result" | python3 -c '
import json, sys
r = json.load(sys.stdin)
hops = ", ".join(h["observer"] + " said " + h["reply"] for h in r["trace"])
print("    story: %s; the event was %s by %s, presenting with %s" % (hops, r["outcome"], r["by"], json.dumps(r["value"])))'

say "A click arrives while no observer handles didReceive: the broker keeps it for launch"
result=$(nb post didReceive '{"actionIdentifier":"com.apple.UNNotificationDefaultActionIdentifier","notification":{"identifier":"msg-1","content":{"userInfo":{"chatId":"ana"}}}}')
echo "    result: $result"
echo "    the app starts and takes its launch payload once: $(nb take launch)"
echo "    asking again gives: $(nb take launch)"

say "Counters"
nb status --json | python3 -c 'import json,sys; print("    " + json.dumps(json.load(sys.stdin)["counters"]))'
say "Done"
