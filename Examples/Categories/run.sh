#!/usr/bin/env bash
# Categories: the app registers three notification categories, one observer process per
# category handles its own actions on didReceive and passes the rest on, and `notifbus
# click` plays the user. Prints who handled each click, refused clicks and launch retention.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"

OBSERVER=$(dirname "$NOTIFBUS_BIN")/categories-observer
if [ ! -x "$OBSERVER" ]; then
    echo "example: $OBSERVER is not built; run 'swift build' first" >&2
    exit 1
fi
LOG=$WORK/observers.log

# shown ARGS...: the arguments as a reader would type them, quoting those with spaces.
shown() {
    local a out=""
    for a in "$@"; do
        if [[ $a == *[[:space:]?]* ]]; then out+=" '$a'"; else out+=" $a"; fi
    done
    echo "${out# }"
}

# click ID ARGS...: the user acts on notification ID; prints the bus's answer, or why the
# bus refused the click. Waits until an observer has logged the click, if one saw it.
click() {
    local id=$1 out before
    shift
    echo "    \$ notifbus click --id $id $(shown "$@")"
    before=$(log_lines "$LOG")
    if out=$(nb click --id "$id" "$@" 2>&1); then
        echo "    $out"
        wait_log " on $id: " "$LOG" "$before"
        sleep 0.05 # lets the tagged copy of the observers' lines print before the next step
    else
        echo "    refused at the bus: ${out#notifbus click: }"
    fi
}

# notify ID ARGS...: a notification arrives while the app is in the foreground.
notify() {
    local id=$1
    shift
    echo "    \$ notifbus notify --id $id $(shown "$@")"
    echo "    $(nb notify --id "$id" "$@")"
}

posted() {
    nb status --json | python3 -c 'import json, sys; print(json.load(sys.stdin)["counters"]["posted"])'
}

say "Starting the broker on $NOTIFBUS_SOCKET"
start_broker --hop-timeout 5s

say "The app registers its categories (setNotificationCategories), then reads them back"
"$OBSERVER" --register | sed 's/^/    /'
echo "    the bus holds $(nb categories get | python3 -c 'import json, sys; print(", ".join(c["identifier"] for c in json.load(sys.stdin)))')"

say "Three observer processes, one per category, each on willPresent and didReceive"
start_logged invites "$LOG" "$OBSERVER" --role invites
wait_log "invites observing" "$LOG"
start_logged messages "$LOG" "$OBSERVER" --role messages
wait_log "messages observing" "$LOG"
start_logged reminders "$LOG" "$OBSERVER" --role reminders
REMINDERS_PID=${PIDS[-1]}
wait_log "reminders observing" "$LOG"
sleep 0.1

say "Notifications arrive in the foreground: each category's observer decides how to present"
notify inv-1 --title "Team lunch" --body "Friday 12:30" --category INVITE --source remote
notify msg-1 --title Ana --body "Lunch?" --category MESSAGE --source remote
notify news-1 --title "Daily digest" --source local

say "Invite: Accept (foreground) and Decline (destructive) go to the invites process"
click inv-1 --title "Team lunch" --category INVITE --action ACCEPT
click inv-2 --title "Board meeting" --category INVITE --action DECLINE

say "Message: the inline Reply carries the typed text; the custom dismiss is reported too"
click msg-1 --title Ana --category MESSAGE --action REPLY --text "Sounds good, see you at noon"
click msg-2 --title Ana --category MESSAGE --action dismiss

say "Clicks the categories do not allow are refused at the bus and reach no observer"
before=$(posted)
lines=$(log_lines "$LOG")
click msg-3 --category MESSAGE --action REPLY
click inv-3 --category INVITE --action dismiss
click inv-3 --category INVITE --action REPLY --text "hi"
sleep 0.2
after=$(posted)
seen=$(($(log_lines "$LOG") - lines))
if [ "$before" = "$after" ] && [ "$seen" -eq 0 ]; then
    echo "    posted counter unchanged ($before -> $after): no observer saw them"
else
    echo "    UNEXPECTED: posted $before -> $after, $seen observer lines"
fi

say "Reminder: Snooze runs in the background in the reminders process; Open needs the app"
click rem-1 --title "Water the plants" --category REMINDER --action SNOOZE
click rem-1 --title "Water the plants" --category REMINDER --action OPEN
echo "    the app is not running; it starts and takes the click that launched it, once:"
echo "    notifbus take launch: $(nb take launch)"
echo "    asking again: $(nb take launch)"

say "The reminders process quits: nobody handles reminder clicks any more"
stop_pid "$REMINDERS_PID"
wait_status_gone "categories-reminders"
click rem-2 --title "Call mum" --category REMINDER --action SNOOZE
echo "    the launch slot after the background Snooze: $(nb peek launch)"
click rem-2 --title "Call mum" --category REMINDER --action OPEN
click msg-4 --title Ana --category MESSAGE
echo "    the launch slot holds the newest launching click: $(nb take launch | python3 -c 'import json, sys; p = json.load(sys.stdin); print(p["notification"]["identifier"], p["actionIdentifier"])')"

say "Counters"
nb status --json | python3 -c 'import json, sys; print("    " + json.dumps(json.load(sys.stdin)["counters"]))'
say "Done"
