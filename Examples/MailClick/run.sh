#!/usr/bin/env bash
# MailClick: the three paths of a tap on a mail notification, each process separate: the
# native host (mailclick-host), the app (mailclick-app, then the Python app) and the
# notification source (notifbus post). Prints the story step by step. On a real desktop,
# where the click starts the app that is not running (mailclick-app --desktop, started by
# `notifbus desktop --app-id`), the story is Examples/Desktop/run.sh.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"

BIN=$(dirname "$NOTIFBUS_BIN")
for exe in mailclick-host mailclick-app; do
    if [ ! -x "$BIN/$exe" ]; then
        echo "example: $BIN/$exe is not built; run 'swift build' first" >&2
        exit 1
    fi
done

# How long the host's take waits for a launch click that is still on its way. It covers
# the gap between the early-asking app of step 3 and the tap, on a busy machine too.
LAUNCH_WAIT=3
OPEN_METHOD=current_email_id_in_notification_click_when_app_foreground_or_background
HOST_LOG=$WORK/host.log

# click EMAIL TITLE: the notification source: the user taps the notification of EMAIL.
click() {
    local payload result
    payload=$(printf '{"actionIdentifier":"com.apple.UNNotificationDefaultActionIdentifier","notification":{"identifier":"mail-%s","source":"remote","content":{"title":"%s","userInfo":{"emailId":"%s"}}}}' "$1" "$2" "$1")
    echo "    post didReceive $payload"
    result=$(nb post didReceive "$payload" --timeout 30s)
    echo "    result: $result"
    python3 -c '
import json, sys
r = json.loads(sys.argv[1])
hops = ", ".join(h["observer"] + " said " + h["reply"] for h in r["trace"]) or "no observer"
by = " by %s with %s" % (r["by"], json.dumps(r["value"])) if r["by"] else ""
print("    story: %s; the event was %s%s; retained: %s" % (hops, r["outcome"], by, json.dumps(r["retained"])))' "$result"
}

# quit_app PID: the app quits; waits until the broker has dropped its handler.
quit_app() {
    stop_pid "$1"
    wait_status_gone "$OPEN_METHOD"
}

say "Starting the broker on $NOTIFBUS_SOCKET"
start_broker --hop-timeout 10s --call-timeout 20s

say "The native host observes didReceive (key mail-native-host) and answers the app's launch question"
start_logged host "$HOST_LOG" "$BIN/mailclick-host" --launch-wait "$LAUNCH_WAIT" --run-for 300
host=${PIDS[-1]}
wait_status "mail-native-host"
wait_status "current_email_id_in_notification_click_when_app_terminated"

say "(1) Foreground/background: the app is running when the user taps a notification"
start_logged app "$WORK/app1.log" "$BIN/mailclick-app" --run-for 120
app=${PIDS[-1]}
wait_status "$OPEN_METHOD"
wait_log "launched normally (no click)" "$WORK/app1.log"
click e-1 "Ana: Lunch on Friday?"
wait_log "opening email e-1" "$WORK/app1.log"
echo "    slot launch holds: $(nb peek launch)"

say "The app quits"
quit_app "$app"

say "(2) Terminated: the app is not running when the user taps a notification"
click e-2 "Ben: Contract draft"
echo "    slot launch holds: $(nb peek launch)"

say "The tap starts the app: it asks which click launched it, then asks a second time"
start_logged app "$WORK/app2.log" "$BIN/mailclick-app" --ask-twice --run-for 120
app=${PIDS[-1]}
wait_log "asked again:" "$WORK/app2.log"
echo "    slot launch holds: $(nb peek launch)"
quit_app "$app"

say "(2) again, with the app written in Python: the host cannot tell the difference"
click e-3 "Dana: Photos from the trip"
start_logged app.py "$WORK/app2py.log" python3 "$HERE/python/mailclick_app.py" --ask-twice --run-for 120
app=${PIDS[-1]}
wait_log "asked again:" "$WORK/app2py.log"
echo "    slot launch holds: $(nb peek launch)"
quit_app "$app"

say "(3) The app asks too early: launched by the tap, it asks before it handles clicks (--ask-first)"
mark=$(log_lines "$HOST_LOG")
start_logged app "$WORK/app3.log" "$BIN/mailclick-app" --ask-first --run-for 120
app=${PIDS[-1]}
wait_log "taking slot 'launch'" "$HOST_LOG" "$mark"
echo "    the host's take is waiting on slot launch; now the tap's didReceive arrives"
click e-4 "Eli: Tickets for Saturday"
wait_log "launched by a click on email e-4" "$WORK/app3.log"
wait_log "ready: handling" "$WORK/app3.log"
echo "    slot launch holds: $(nb peek launch) (the click went straight to the waiting take)"

say "Counters"
nb status --json | python3 -c 'import json,sys; print("    " + json.dumps(json.load(sys.stdin)["counters"]))'

say "The app and the native host close"
stop_pid "$app"
stop_pid "$host"
say "Done"
