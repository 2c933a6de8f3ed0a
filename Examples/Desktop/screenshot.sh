#!/usr/bin/env bash
# Draws a notification with its actions as a real notification server does, under Xvfb, and
# saves a PNG: a private session bus, the server, a broker, `notifbus desktop`, one `add`.
# `terminated` draws the terminated-state flow: dunst shows a mail while the mail app is not
# running; the click (dunstctl action 0) makes the bridge start the app from its desktop
# file, and what the bridge and the app print is drawn under the screen.
# Usage: Examples/Desktop/screenshot.sh [dunst|notification-daemon|terminated] [OUT.png]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${NOTIFBUS_BIN_DIR:-$ROOT/.build/debug}
SERVER=${1:-notification-daemon}
OUT=${2:-$HERE/$SERVER.png}
for exe in notifbus notifbus-desktop mailclick-app; do
    [ -x "$BIN/$exe" ] || { echo "screenshot: $BIN/$exe is not built; run 'swift build' first" >&2; exit 1; }
done
case "$SERVER" in
    dunst) SERVER_CMD=(dunst -config "$HERE/dunstrc") ;;
    notification-daemon) SERVER_CMD=(/usr/lib/notification-daemon/notification-daemon -r) ;;
    terminated) SERVER_CMD=(dunst -config "$HERE/dunstrc") ;;
    *) echo "screenshot: the first argument must be dunst, notification-daemon or terminated" >&2; exit 2 ;;
esac
command -v "${SERVER_CMD[0]}" >/dev/null || { echo "screenshot: ${SERVER_CMD[0]} is not installed (scripts/setup.sh)" >&2; exit 1; }

WORK=$(mktemp -d /tmp/nbshot.XXXXXX)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do timeout 5 tail --pid="$pid" -f /dev/null 2>/dev/null || kill -9 "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

source "$HERE/private-desktop.sh"
start_private_desktop 800x150
export NOTIFBUS_SOCKET=$WORK/bus.sock

"${SERVER_CMD[@]}" >"$WORK/server.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do
    gdbus call --session -d org.freedesktop.DBus -o /org/freedesktop/DBus -m org.freedesktop.DBus.NameHasOwner \
        org.freedesktop.Notifications 2>/dev/null | grep -q true && break
    sleep 0.1
done
"$BIN/notifbus" broker >"$WORK/broker.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do "$BIN/notifbus" ping >/dev/null 2>&1 && break; sleep 0.05; done
"$BIN/notifbus" categories set "$HERE/categories.json" >/dev/null
if [ "$SERVER" != terminated ]; then
    "$BIN/notifbus" desktop --app-name MailClick 2>"$WORK/bridge.log" &
    PIDS+=($!)
    for _ in $(seq 1 100); do grep -q "serving channel" "$WORK/bridge.log" && break; sleep 0.05; done
    "$BIN/notifbus" notify --deliver --id mail-e-1 --title "Ana Lima" --body "Lunch on Friday? The new place on 5th." \
        --category MESSAGE --user-info '{"emailId":"e-1"}'
    sleep 1.5
    import -window root "$OUT"
    echo "screenshot: $SERVER drew it; saved $OUT"
    exit 0
fi

# The terminated state: the mail app (mailclick-app --desktop) is described by a desktop
# file and is not running.
APP_ID=org.example.MailClick
mkdir -p "$WORK/data/applications"
printf '[Desktop Entry]\nType=Application\nName=Mail\nExec=%s --desktop %s --run-for 60\n' \
    "$BIN/mailclick-app" "$APP_ID" >"$WORK/data/applications/$APP_ID.desktop"
XDG_DATA_HOME=$WORK/data "$BIN/notifbus" desktop --app-id "$APP_ID" 2>"$WORK/bridge.log" &
PIDS+=($!)
for _ in $(seq 1 100); do grep -q "serving channel" "$WORK/bridge.log" && break; sleep 0.05; done
"$BIN/notifbus" notify --deliver --id mail-e-2 --title "Ben Okafor" --body "Contract draft: please read before Monday." \
    --category INVITE --user-info '{"emailId":"e-2"}' >/dev/null
sleep 1.5
import -window root "$WORK/screen.png"
dunstctl action 0
for _ in $(seq 1 200); do grep -q "launched by a click on email" "$WORK/bridge.log" && break; sleep 0.05; done
started=$(grep -o "(pid [0-9]*)" "$WORK/bridge.log" | head -1 | tr -dc 0-9)
[ -n "$started" ] && PIDS+=("$started")
story=$(
    echo "The mail app is not running. The user clicks the notification (dunstctl action 0):"
    grep -E "retained for launch|starting $APP_ID|launched by a click|observes didReceive" "$WORK/bridge.log" |
        sed -e 's/^notifbus desktop: //' -e "s|$BIN/||g" -e 's/com.apple.UNNotificationDefaultActionIdentifier/(default action)/'
)
convert -background '#202124' -fill '#e8eaed' -font DejaVu-Sans-Mono -pointsize 12 -size 780x caption:"$story" \
    -bordercolor '#202124' -border 10 "$WORK/story.png"
convert "$WORK/screen.png" "$WORK/story.png" -append "$OUT"
echo "screenshot: dunst drew the notification, the bridge started the app; saved $OUT"
