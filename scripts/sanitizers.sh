#!/usr/bin/env bash
# Runs the Swift test suites under AddressSanitizer (with LeakSanitizer) and under
# ThreadSanitizer, each in a build folder of its own (.build-asan, .build-tsan). The
# integration tests start the `notifbus` built beside the test bundle, so the broker runs
# sanitized too. Only third-party leaks are suppressed (Fuzz/lsan.supp).
# Usage: scripts/sanitizers.sh [asan|tsan]...   (default: both)
set -uo pipefail
cd "$(dirname "$0")/.."

export LSAN_OPTIONS="suppressions=$PWD/Fuzz/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
# A crashing sanitized process must report and exit, not wait for the backtracer.
export SWIFT_BACKTRACE="enable=no"

kinds=("$@")
[ ${#kinds[@]} -gt 0 ] || kinds=(asan tsan)
failed=()
for kind in "${kinds[@]}"; do
    case $kind in
        asan) flags=(-Xswiftc -sanitize=address -Xswiftc -use-ld=lld) ;;
        tsan) flags=(-Xswiftc -sanitize=thread) ;;
        *) echo "usage: $0 [asan|tsan]..." >&2; exit 2 ;;
    esac
    build=.build-$kind
    start=$SECONDS
    echo "==> $kind: swift build --build-tests --build-path $build ${flags[*]}"
    if ! timeout 1500 swift build --build-tests --build-path "$build" "${flags[@]}"; then
        failed+=("$kind build")
        continue
    fi
    echo "    built in $((SECONDS - start)) s"
    start=$SECONDS
    echo "==> $kind: swift test"
    if ! NOTIFBUS_BIN="" timeout 1200 swift test --skip-build --build-path "$build" "${flags[@]}"; then
        failed+=("$kind tests")
    fi
    echo "    tests ran in $((SECONDS - start)) s"
done
for f in "${failed[@]}"; do echo "sanitizers: failed: $f"; done
[ ${#failed[@]} -eq 0 ]
