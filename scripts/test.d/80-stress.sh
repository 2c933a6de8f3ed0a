#!/usr/bin/env bash
# slow
# Stress, chaos, durability, security and fairness checks against the built broker (Tests/stress/):
# each program prints its figures and exits non-zero when a check fails. Chaos runs 60 s
# (NOTIFBUS_CHAOS_SECONDS to change it); restarts.py restarts the broker 20 times under clients
# of all three languages. The whole step takes about two minutes and a half.
set -uo pipefail
cd "$(dirname "$0")/../.."
export NOTIFBUS_BIN="${NOTIFBUS_BIN:-$PWD/.build/debug/notifbus}"

failed=()
run() {
    local limit=$1
    shift
    echo "--> $*"
    # timeout sends SIGTERM first: the programs then kill their children and exit.
    if ! timeout --kill-after=10 "$limit" python3 "$@"; then
        failed+=("$1")
    fi
    echo
}

run 150 Tests/stress/chaos.py --seconds "${NOTIFBUS_CHAOS_SECONDS:-60}"
run 90 Tests/stress/load.py
run 90 Tests/stress/durability.py --rounds 5
run 120 Tests/stress/security.py
run 120 Tests/stress/fairness.py
run 120 Tests/stress/restarts.py --restarts 20

for f in "${failed[@]}"; do echo "stress: failed: $f"; done
[ "${#failed[@]}" -eq 0 ]
