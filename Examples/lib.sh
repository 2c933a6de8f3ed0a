# Shared by the example scripts: find the notifbus binary, start a broker on a private
# socket, start and stop helper processes, and print the story. Sourced, not run.

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
