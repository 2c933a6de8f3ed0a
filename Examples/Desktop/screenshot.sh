#!/usr/bin/env bash
# Draws a notification with its actions as a real notification server does, under Xvfb, and
# saves a PNG: a private session bus, the server, a broker, `notifbus desktop`, one `add`.
# Usage: Examples/Desktop/screenshot.sh [dunst|notification-daemon] [OUT.png]
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
BIN=${NOTIFBUS_BIN_DIR:-$ROOT/.build/debug}
SERVER=${1:-notification-daemon}
OUT=${2:-$HERE/$SERVER.png}
for exe in notifbus notifbus-desktop; do
    [ -x "$BIN/$exe" ] || { echo "screenshot: $BIN/$exe is not built; run 'swift build' first" >&2; exit 1; }
done
case "$SERVER" in
    dunst) SERVER_CMD=(dunst -config "$HERE/dunstrc") ;;
    notification-daemon) SERVER_CMD=(/usr/lib/notification-daemon/notification-daemon -r) ;;
    *) echo "screenshot: server must be dunst or notification-daemon" >&2; exit 2 ;;
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
"$BIN/notifbus" desktop --app-name MailClick 2>"$WORK/bridge.log" &
PIDS+=($!)
for _ in $(seq 1 100); do grep -q "serving channel" "$WORK/bridge.log" && break; sleep 0.05; done
"$BIN/notifbus" notify --deliver --id mail-e-1 --title "Ana Lima" --body "Lunch on Friday? The new place on 5th." \
    --category MESSAGE --user-info '{"emailId":"e-1"}'
sleep 1.5
import -window root "$OUT"
echo "screenshot: $SERVER drew it; saved $OUT"
