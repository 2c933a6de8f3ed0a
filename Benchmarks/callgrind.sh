#!/usr/bin/env bash
# Counts instructions per operation of the broker's per-frame work: runs each
# notifbus-microbench mode under `valgrind --tool=callgrind` for N and for 0 operations and
# prints (total(N) - total(0)) / N beside issue 15's targets. Prints figures; asserts nothing.
#
# usage: Benchmarks/callgrind.sh [N]      (N defaults to 20000; validate64k runs N/400 frames)
# env:   MICROBENCH=path   use this binary instead of building .build/release/notifbus-microbench
#        KEEP=dir          keep the callgrind.out files in dir (for Benchmarks/callgrind_profile.py)
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:-20000}
if ! [[ "$n" =~ ^[0-9]+$ ]] || [ "$n" -lt 400 ]; then
    echo "callgrind.sh: N must be an integer >= 400, not '$n'" >&2
    exit 2
fi
command -v valgrind >/dev/null || { echo "callgrind.sh: valgrind is not installed (scripts/setup.sh)" >&2; exit 2; }

bin=${MICROBENCH:-}
if [ -z "$bin" ]; then
    swift build -c release --product notifbus-microbench >&2
    bin=.build/release/notifbus-microbench
fi

out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Total instructions (Ir) of one run, from callgrind's summary line.
total() {
    local mode=$1 count=$2 file="$out/callgrind.out.$1.$2"
    timeout 600 valgrind --tool=callgrind --callgrind-out-file="$file" "$bin" "$mode" "$count" \
        >"$out/stdout.$mode.$count" 2>"$out/stderr.$mode.$count" || {
        echo "callgrind.sh: $mode $count failed:" >&2
        cat "$out/stderr.$mode.$count" >&2
        exit 1
    }
    if [ -n "${KEEP:-}" ]; then mkdir -p "$KEEP" && cp "$file" "$KEEP/"; fi
    awk '/^(summary|totals):/ { print $2; exit }' "$file"
}

printf '%-22s %10s %14s %14s %12s %10s\n' mode N 'total(N)' 'total(0)' 'instr/op' target
# mode, count, target (0: none), bytes per operation (0: none)
rows=("core-invoke $n 4000" "core-invoke-monitored $n 0" "ping $n 800" "chain3 $n 8000" "chain3-once $n 8000" "validate64k $((n / 400)) 0")
for row in "${rows[@]}"; do
    read -r mode count target <<<"$row"
    a=$(total "$mode" "$count")
    b=$(total "$mode" 0)
    per=$(( (a - b) / count ))
    if [ "$target" -gt 0 ]; then
        verdict="<= $target $([ "$per" -le "$target" ] && echo met || echo "MISSED x$(awk -v p="$per" -v t="$target" 'BEGIN { printf "%.1f", p / t }')")"
    elif [ "$mode" != validate64k ]; then
        verdict="(no target; compare with core-invoke)"
    else
        frame=$(sed -n 's/.*of a \([0-9]*\)-byte.*/\1/p' "$out/stdout.$mode.$count")
        verdict="$(awk -v p="$per" -v f="$frame" 'BEGIN { printf "%.1f instr/byte", p / f }')"
    fi
    printf '%-22s %10s %14s %14s %12s   %s\n' "$mode" "$count" "$a" "$b" "$per" "$verdict"
done
