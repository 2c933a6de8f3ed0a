#!/usr/bin/env bash
# Counts the instructions the whole broker process (transport, decode, core) spends per invoke
# round trip: runs notifbus-bench's invoke row twice against the release broker under
# `valgrind --tool=callgrind` (few and many round trips) and divides the difference in
# instructions by the difference in returns handled. Prints figures; asserts nothing.
#
# usage: Benchmarks/callgrind-broker.sh [TOP]     (TOP functions to list, default 25)
# env:   KEEP=dir     keep the two callgrind.out files in dir
#        BROKER=path  measure this notifbus binary instead of building .build/release/notifbus
#                     (an older build beside the new one, for before/after figures)
set -euo pipefail
cd "$(dirname "$0")/.."
top=${1:-25}
command -v valgrind >/dev/null || { echo "callgrind-broker.sh: valgrind is not installed (scripts/setup.sh)" >&2; exit 2; }
broker=${BROKER:-}
if [ -z "$broker" ]; then
    swift build -c release --product notifbus >&2
    broker=$PWD/.build/release/notifbus
fi
swift build -c release --product notifbus-bench >&2

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
# The bench execs "$broker broker --socket ..."; this wrapper puts the broker under callgrind.
cat >"$out/broker" <<EOF
#!/bin/sh
exec valgrind --tool=callgrind --callgrind-out-file="$out/\$RUN.out" "$broker" "\$@"
EOF
chmod +x "$out/broker"

for run in few many; do
    iterations=$([ "$run" = few ] && echo 300 || echo 3000)
    RUN=$run timeout 300 .build/release/notifbus-bench --broker "$out/broker" --only invoke \
        --rounds 1 --iterations "$iterations" >"$out/$run.txt" 2>&1 || {
        echo "callgrind-broker.sh: the bench failed:" >&2
        cat "$out/$run.txt" >&2
        exit 1
    }
done
if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$out"/*.out "$KEEP/"; fi
echo "broker process, per invoke round trip (invoke in, call out, return in, reply out; user space only):"
python3 Benchmarks/callgrind_profile.py "$out/many.out" "$out/few.out" calls:handleReturn "$top"
