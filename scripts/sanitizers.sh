#!/usr/bin/env bash
# Runs the Swift test suites under AddressSanitizer (with LeakSanitizer) and under
# ThreadSanitizer, each in a build folder of its own (.build-asan, .build-tsan), never the
# ordinary .build. The integration tests start the `notifbus` built beside the test bundle,
# so the broker and the CLI run sanitized too. Every sanitized process, test runner and
# broker alike, writes its reports under the build folder; any report, like any failing
# test, fails the run. Only third-party leaks are suppressed (Fuzz/lsan.supp).
# Usage: scripts/sanitizers.sh [asan|tsan]...     (default: both)
#        SANITIZER_FILTER=REGEX runs only the tests it matches (swift test --filter).
set -uo pipefail
cd "$(dirname "$0")/.."
root=$PWD

kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(asan tsan)
for kind in "${kinds[@]}"; do
    case $kind in asan | tsan) ;; *) echo "usage: $0 [asan|tsan]..." >&2; exit 2 ;; esac
done

# A crashing sanitized process must report and exit, not wait for the Swift backtracer.
export SWIFT_BACKTRACE=enable=no
export LSAN_OPTIONS="suppressions=$root/Fuzz/lsan.supp:print_suppressions=0"
filter=()
[ -n "${SANITIZER_FILTER:-}" ] && filter=(--filter "$SANITIZER_FILTER")

failed=()
figures=()
for kind in "${kinds[@]}"; do
    build=.build-$kind
    reports=$root/$build/sanitizer-reports
    log=$root/$build/swift-test.log
    skip=()
    if [ "$kind" = asan ]; then
        flags=(-Xswiftc -sanitize=address -Xswiftc -use-ld=lld)
        symbol=__asan_init
        # atexit=1 makes every sanitized process that exits normally leave a statistics
        # file: the count of notifbus files shows the broker and CLI really ran sanitized.
        export ASAN_OPTIONS="log_path=$reports/asan:log_exe_name=1:detect_leaks=1:atexit=1"
    else
        flags=(-Xswiftc -sanitize=thread)
        symbol=__tsan_init
        # ThreadSanitizer's runtime faults (SIGBUS) at start-up in a process with a file
        # size limit, which FullDiskTests sets on its child broker (`ulimit -f`); that test
        # runs in the ordinary and the ASan runs.
        skip=(--skip FullDiskTests)
        export TSAN_OPTIONS="log_path=$reports/tsan:log_exe_name=1:halt_on_error=0:second_deadlock_stack=1"
    fi
    rm -rf "$reports"
    mkdir -p "$reports"

    echo
    echo "==> $kind: swift build --build-tests --build-path $build ${flags[*]}"
    start=$SECONDS
    if ! timeout 1500 swift build --build-tests --build-path "$build" "${flags[@]}"; then
        failed+=("$kind: build")
        continue
    fi
    build_seconds=$((SECONDS - start))
    bin=$(swift build --build-path "$build" "${flags[@]}" --show-bin-path)
    for exe in notifbus notifbusPackageTests.xctest; do
        if ! nm "$bin/$exe" 2>/dev/null | grep " $symbol\$" >/dev/null; then
            echo "$kind: $bin/$exe is not instrumented"
            failed+=("$kind: $exe not instrumented")
            continue 2
        fi
    done

    echo "==> $kind: NOTIFBUS_BIN=$bin/notifbus swift test --skip-build --build-path $build ${flags[*]} ${filter[*]} ${skip[*]}"
    start=$SECONDS
    NOTIFBUS_BIN="$bin/notifbus" timeout 1500 swift test --skip-build --build-path "$build" "${flags[@]}" "${filter[@]}" "${skip[@]}" >"$log" 2>&1
    status=$?
    test_seconds=$((SECONDS - start))
    grep -E 'Test run with|Executed [0-9]+ tests?' "$log" | sed 's/^[[:space:]]*/    /' | sort -u
    if [ "$status" -ne 0 ]; then
        failed+=("$kind: swift test exited $status")
        echo "--- last lines of $log:"
        tail -60 "$log"
    fi

    # Reports: files holding an error or a warning (statistics files hold neither).
    mapfile -t found < <(grep -l -E 'ERROR: (AddressSanitizer|LeakSanitizer)|WARNING: ThreadSanitizer' "$reports"/* 2>/dev/null)
    processes=$(find "$reports" -name "*.notifbus.*" | wc -l)
    for report in "${found[@]}"; do
        echo "--- $kind report $report:"
        head -120 "$report"
    done
    if [ ${#found[@]} -gt 0 ]; then
        failed+=("$kind: ${#found[@]} report(s) in $reports")
        grep -h '^SUMMARY' "${found[@]}" | sort | uniq -c
    fi
    line="$kind: build ${build_seconds} s, tests ${test_seconds} s, ${#found[@]} report(s)"
    [ "$kind" = asan ] && line+=", $processes sanitized notifbus processes exited through the leak check"
    figures+=("$line")
    echo "$line"
done

echo
for f in "${figures[@]}"; do echo "sanitizers: $f"; done
for f in "${failed[@]}"; do echo "sanitizers: FAILED: $f"; done
[ ${#failed[@]} -eq 0 ]
