#!/usr/bin/env bash
# Fuzzes the protocol decoder, the broker core and the NATS bridge's exactly-once machine:
# builds fuzz-decoder, fuzz-core and fuzz-bridge with
# libFuzzer and AddressSanitizer in .build-fuzz (never the ordinary .build), runs each for
# SECONDS (default 60) from the seeds in Fuzz/corpus/ (with Fuzz/NAME.dict as libFuzzer's
# dictionary where there is one), and prints libFuzzer's figures.
# Fails on any crash, leak, timeout or broken invariant; the input is kept under
# .build-fuzz/artifacts/. Usage: scripts/fuzz.sh [SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."

seconds=${1:-60}
case $seconds in '' | *[!0-9]*) echo "usage: $0 [SECONDS]" >&2; exit 2 ;; esac
build=.build-fuzz
flags=(-c release --build-path "$build" -Xswiftc -sanitize=fuzzer,address -Xswiftc -use-ld=lld)
# Leaks in Foundation or XCTest cannot occur here (neither is linked); the file is shared
# with scripts/sanitizers.sh so that one list says what is suppressed.
export LSAN_OPTIONS="suppressions=$PWD/Fuzz/lsan.supp:print_suppressions=0"
# A crashing input must be reported at once, not wait for the Swift backtracer.
export SWIFT_BACKTRACE="enable=no"

for target in fuzz-decoder fuzz-core fuzz-bridge; do
    echo "==> swift build ${flags[*]} --product $target"
    start=$SECONDS
    if ! timeout 1200 swift build "${flags[@]}" --product "$target"; then
        echo "fuzz: building $target failed"
        exit 1
    fi
    echo "    built in $((SECONDS - start)) s"
done
bin=$(swift build "${flags[@]}" --show-bin-path) || exit 1

failed=0
for name in decoder core bridge; do
    target=fuzz-$name
    corpus=$build/corpus/$name      # grows between runs; the seeds stay read-only
    artifacts=$build/artifacts/$name
    log=$build/$target.log
    mkdir -p "$corpus" "$artifacts"
    # -timeout: an input running 10 s is a hang. -rss_limit_mb and -malloc_limit_mb bound
    # memory; each target also bounds the peak heap per input in its own code.
    cmd=("$bin/$target" -max_total_time="$seconds" -max_len=4096 -timeout=10 -rss_limit_mb=2048
         -malloc_limit_mb=256 -print_final_stats=1 -artifact_prefix="$artifacts/")
    # A dictionary of the protocol's tokens, where the target has one (Fuzz/NAME.dict).
    if [ -f "Fuzz/$name.dict" ]; then cmd+=(-dict="Fuzz/$name.dict"); fi
    cmd+=("$corpus" "Fuzz/corpus/$name")
    echo
    echo "==> ${cmd[*]}"
    timeout $((seconds + 300)) "${cmd[@]}" >"$log" 2>&1
    status=$?
    seeds=$(find "Fuzz/corpus/$name" -type f | wc -l)
    final=$(grep -aE '^#[0-9]+[[:space:]]+(DONE|pulse|NEW|REDUCE|INITED)' "$log" | tail -1)
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    added=$(sed -n 's/^stat::new_units_added: *//p' "$log")
    rss=$(sed -n 's/^stat::peak_rss_mb: *//p' "$log")
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$final")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$final")
    corp=$(sed -n 's/.* corp: \([^ ]*\).*/\1/p' <<<"$final")
    echo "$target: ${execs:-?} executions in ${seconds} s (${rate:-?} exec/s), cov ${cov:-?}, ft ${ft:-?}," \
        "corpus ${corp:-?} (${seeds} seeds, ${added:-?} new), peak RSS ${rss:-?} MB"
    if [ "$status" -ne 0 ]; then
        failed=1
        echo "$target: FAILED (exit $status); log: $log"
        grep -aE 'invariant broken|ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer)|SUMMARY|Test unit written|deadly signal' "$log" | head -20
        echo "--- last lines of the log:"
        tail -40 "$log"
        ls -l "$artifacts"
    fi
done
exit $failed
