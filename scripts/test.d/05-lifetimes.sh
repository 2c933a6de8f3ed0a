#!/usr/bin/env bash
# The compiler keeps decoded user data within the life of their frame: each snippet in
# Tests/lifetimes/ that keeps a view beyond it (its "expect:" line names the diagnostic) must
# fail to compile with that diagnostic, and inScope.swift, which reads the views while the
# frame lives, must compile. Runs against the debug build's NotifBusProtocol module.
set -euo pipefail
cd "$(dirname "$0")/../.."

modules="$(swift build --show-bin-path)/Modules"
[ -f "$modules/NotifBusProtocol.swiftmodule" ] || { echo "05-lifetimes: build the package first (no $modules)" >&2; exit 1; }
compile() {
    timeout 300 swiftc -emit-sil -o /dev/null -parse-as-library -enable-experimental-feature Lifetimes -I "$modules" "$1" 2>&1
}

status=0
for snippet in Tests/lifetimes/*.swift; do
    expected=$(sed -n 's|^// expect: ||p' "$snippet")
    if output=$(compile "$snippet"); then
        if [ -n "$expected" ]; then
            echo "FAIL $snippet compiles; it must be refused ($expected)"
            status=1
        else
            echo "ok   $snippet compiles"
        fi
    elif [ -z "$expected" ]; then
        echo "FAIL $snippet must compile:"
        echo "$output"
        status=1
    elif grep -q "error: .*$expected" <<<"$output"; then
        echo "ok   $snippet is refused: $(grep -m1 -o "error: .*$expected.*" <<<"$output")"
    else
        echo "FAIL $snippet is refused, but not with '$expected':"
        echo "$output"
        status=1
    fi
done
exit $status
