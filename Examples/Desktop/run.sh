#!/usr/bin/env bash
# MailClick on a real desktop: the mail notifications are shown by a real notification
# server through `notifbus desktop`; the clicks and dismissals the server reports reach the
# mail app and a Python read-state service as didReceive, and a click while the app is not
# running makes the bridge start the app from its desktop file, which opens that mail.
# Usage: Examples/Desktop/run.sh           dunst on a private Xvfb and session bus; clicks by dunstctl
#        Examples/Desktop/run.sh --here    your own desktop's session bus; you click
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/private-desktop.sh"

BIN=$(dirname "$NOTIFBUS_BIN")
for exe in mailclick-app notifbus-desktop; do
    if [ ! -x "$BIN/$exe" ]; then
        echo "example: $BIN/$exe is not built; run 'swift build' first" >&2
        exit 1
    fi
done
MODE=${1:-xvfb}
APP_ID=org.example.MailClick
BRIDGE_LOG=$WORK/bridge.log

if [ "$MODE" = "--here" ]; then
    [ -n "${DBUS_SESSION_BUS_ADDRESS:-}" ] || { echo "example: --here needs DBUS_SESSION_BUS_ADDRESS" >&2; exit 1; }
    # user_clicks WHAT: the person at the desktop does it; the script waits for its effect.
    user_clicks() { echo "    >>> $1 on your screen now"; }
    shown() { echo "    the desktop's server shows it"; }
else
    say "A private desktop: Xvfb, a session bus that activates nothing, dunst"
    start_private_desktop 1024x768
    # The server first: dunst's D-Bus activation file must not be what starts it.
    start_cmd dunst dunst -config "$HERE/dunstrc"
    for _ in $(seq 1 100); do dunstctl is-paused >/dev/null 2>&1 && break; sleep 0.1; done
    echo "    DISPLAY=$DISPLAY, dunst is up"
    user_clicks() {
        case "$1" in
            click*) echo "    dunstctl action 0   (the user clicks the notification)"; dunstctl action 0 ;;
            dismiss*) echo "    dunstctl close      (the user dismisses the notification)"; dunstctl close ;;
        esac
    }
    shown() {
        for _ in $(seq 1 100); do [ "$(dunstctl count displayed)" = 1 ] && break; sleep 0.05; done
        echo "    dunst displays $(dunstctl count displayed) notification"
    }
fi

# deliver ID EMAIL TITLE [CATEGORY]: the mail arrives; the bridge asks the chain and shows it.
deliver() {
    echo "    notifbus notify --deliver --id $1 --title \"$3\" --user-info '{\"emailId\":\"$2\"}' ${4:+--category $4}"
    echo "    $(nb notify --deliver --id "$1" --title "$3" --body "Open the mail app to read it." --source remote \
        --user-info "{\"emailId\":\"$2\"}" ${4:+--category "$4"})"
}

say "The mail app's desktop file, where the bridge looks for it (XDG_DATA_HOME=$WORK/data)"
mkdir -p "$WORK/data/applications"
cat >"$WORK/data/applications/$APP_ID.desktop" <<DESKTOP
[Desktop Entry]
Type=Application
Name=Mail
Exec=$BIN/mailclick-app --desktop $APP_ID --run-for 300
DESKTOP
sed 's/^/    /' "$WORK/data/applications/$APP_ID.desktop"

say "Starting the broker on $NOTIFBUS_SOCKET, the categories, and the desktop bridge for $APP_ID"
start_broker --hop-timeout 10s --call-timeout 20s
nb categories set "$HERE/categories.json"
XDG_DATA_HOME=$WORK/data start_logged bridge "$BRIDGE_LOG" "$NOTIFBUS_BIN" desktop --app-id "$APP_ID" --state-dir "$WORK/state"
wait_log "serving channel" "$BRIDGE_LOG"

say "The read-state service in Python"
start_logged read-state "$WORK/read.log" python3 "$HERE/mark_read.py"
wait_log "observing didReceive" "$WORK/read.log"

say "(1) The mail app runs; a mail arrives and the user clicks its notification"
start_logged app "$WORK/app1.log" "$BIN/mailclick-app" --desktop "$APP_ID" --run-for 300
app=${PIDS[-1]}
wait_log "ready: observing didReceive as $APP_ID" "$WORK/app1.log"
deliver mail-e-1 e-1 "Ana: Lunch on Friday?"
shown
user_clicks "click the notification 'Ana: Lunch on Friday?'"
wait_log "opening email e-1" "$WORK/app1.log"
wait_log "didReceive com.apple.UNNotificationDefaultActionIdentifier on mail-e-1: completed" "$BRIDGE_LOG"

say "The app quits"
stop_pid "$app"
wait_status_gone "\"$APP_ID\""

say "(2) The app is not running; a mail arrives, stays on the screen, and the user clicks it"
deliver mail-e-2 e-2 "Ben: Contract draft"
shown
user_clicks "click the notification 'Ben: Contract draft'"
wait_log "didReceive com.apple.UNNotificationDefaultActionIdentifier on mail-e-2: unhandled, retained for launch" "$BRIDGE_LOG"
wait_log "starting $APP_ID for didReceive" "$BRIDGE_LOG"
echo "    the bridge starts the app from its desktop file; its output is in the bridge's log"
wait_log "[mail app] launched by a click on email e-2: opening it" "$BRIDGE_LOG"
wait_log "$APP_ID observes didReceive" "$BRIDGE_LOG"
started=$(grep -o "starting $APP_ID for .*(pid [0-9]*)" "$BRIDGE_LOG" | tail -1 | sed 's/.*(pid \([0-9]*\))/\1/')
PIDS+=("$started")
echo "    slot launch holds: $(nb peek launch) (the app took the click)"

say "(3) A mail in category MESSAGE (custom dismiss action); the user dismisses it"
deliver mail-e-3 e-3 "Cy: Minutes of Monday" MESSAGE
shown
user_clicks "dismiss the notification 'Cy: Minutes of Monday'"
wait_log "marked email e-3 as read" "$WORK/read.log"
wait_log "didReceive com.apple.UNNotificationDismissActionIdentifier on mail-e-3: completed" "$BRIDGE_LOG"

say "Still on the desktop: $(nb invoke notifications getDeliveredNotifications)"
stop_pid "$started"
say "Done"
