#!/usr/bin/env bash
# Runs each example script and checks the story it prints.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=$(mktemp)
trap 'rm -f "$out"' EXIT

check() {
    if ! grep -qF -- "$1" "$out"; then
        echo "example output lacks: $1"
        cat "$out"
        exit 1
    fi
}

timeout 60 bash Examples/ChainDemo/run.sh >"$out" 2>&1
check "observer o3 on willPresent at priority 20, replacing o2"
check "observer o2 evicted by o3"
check "story: o1 said next, o3 said complete; the event was completed by o3, presenting with [\"banner\", \"sound\"]"
check '"retained":"launch"'
check 'asking again gives: null'
echo "ChainDemo: ok"
