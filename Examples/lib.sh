# Shared by the example scripts: find the notifbus binary, start a broker on a private
# socket, start and stop helper processes, and print the story. Sourced, not run.

# python3 is the checkout's venv when scripts/setup.sh made one (nats-py, Debian's D-Bus modules).
source "$(dirname "${BASH_SOURCE[0]}")/../scripts/lib/venv.sh"

NOTIFBUS_BIN=${NOTIFBUS_BIN:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/.build/debug/notifbus}
if [ ! -x "$NOTIFBUS_BIN" ]; then
    echo "example: $NOTIFBUS_BIN is not built; run 'swift build' first" >&2
    exit 1
fi
WORK=$(mktemp -d /tmp/nbx.XXXXXX)
export NOTIFBUS_SOCKET="$WORK/bus.sock"
PIDS=()

cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    # Bounded: a helper that ignores SIGTERM is killed after two seconds.
    for _ in $(seq 1 40); do
        alive=0
        for pid in "${PIDS[@]}"; do kill -0 "$pid" 2>/dev/null && alive=1; done
        [ $alive -eq 0 ] && break
        sleep 0.05
    done
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    rm -rf "$WORK"
}
trap cleanup EXIT

nb() { "$NOTIFBUS_BIN" "$@"; }

say() { printf '\n==> %s\n' "$*"; }

# Prefixes each line a helper prints with its name, so the story reads in order.
tag() { sed -u "s/^/    [$1] /"; }

start_broker() {
    "$NOTIFBUS_BIN" broker "$@" 2> >(tag broker >&2) &
    PIDS+=($!)
    for _ in $(seq 1 200); do
        nb ping >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "example: the broker did not start" >&2
    exit 1
}

# start NAME ARGS...: runs `notifbus ARGS` in the background, output tagged with NAME.
start() {
    local name=$1
    shift
    "$NOTIFBUS_BIN" "$@" > >(tag "$name") 2>&1 &
    PIDS+=($!)
}

# start_cmd NAME CMD...: runs any command in the background, output tagged with NAME.
start_cmd() {
    local name=$1
    shift
    "$@" > >(tag "$name") 2>&1 &
    PIDS+=($!)
}

# wait_for TEXT FILE-OR-COMMAND: polls `notifbus status` until TEXT appears (bounded).
wait_status() {
    for _ in $(seq 1 200); do
        nb status 2>/dev/null | grep -q -- "$1" && return 0
        sleep 0.05
    done
    echo "example: timed out waiting for '$1' in status" >&2
    exit 1
}

# start_logged NAME LOG CMD...: as start_cmd, and also appends the raw output to LOG, so
# the script can wait for a line with wait_log.
start_logged() {
    local name=$1 log=$2
    shift 2
    "$@" > >(tee -a "$log" | tag "$name") 2>&1 &
    PIDS+=($!)
}

# log_lines LOG: the number of lines LOG holds now, to pass to wait_log as AFTER.
log_lines() {
    if [ -e "$1" ]; then wc -l <"$1"; else echo 0; fi
}

# wait_log TEXT LOG [AFTER]: polls LOG until TEXT (a fixed string without backslashes)
# appears on a line after the first AFTER lines (default 0). Bounded: 30 s.
wait_log() {
    local after=${3:-0}
    for _ in $(seq 1 600); do
        [ -e "$2" ] && awk -v after="$after" -v text="$1" \
            'NR > after && index($0, text) { found = 1 } END { exit !found }' "$2" && return 0
        sleep 0.05
    done
    echo "example: timed out waiting for '$1' in $2" >&2
    exit 1
}

# wait_status_gone TEXT: polls `notifbus status` until TEXT no longer appears (bounded).
wait_status_gone() {
    local status
    for _ in $(seq 1 200); do
        if status=$(nb status 2>/dev/null) && ! grep -q -- "$1" <<<"$status"; then return 0; fi
        sleep 0.05
    done
    echo "example: timed out waiting for '$1' to leave status" >&2
    exit 1
}

# stop_pid PID: sends SIGTERM to one helper and waits for it to end; SIGKILL after 2 s.
stop_pid() {
    kill "$1" 2>/dev/null || true
    for _ in $(seq 1 40); do
        kill -0 "$1" 2>/dev/null || break
        sleep 0.05
    done
    kill -9 "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}
