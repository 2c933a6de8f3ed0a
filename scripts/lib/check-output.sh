# Sourced by the example steps in scripts/test.d: runs an example script into a temporary
# file and checks lines of its output. Sets EXAMPLE (shown in failures) and OUT.

OUT=$(mktemp)
trap 'rm -f "$OUT"' EXIT

# run_example NAME SECONDS SCRIPT: runs SCRIPT with a time limit, output into $OUT.
run_example() {
    EXAMPLE=$1
    timeout "$2" bash "$3" >"$OUT" 2>&1 || { echo "$EXAMPLE: the script failed"; cat "$OUT"; exit 1; }
}

# check TEXT: TEXT appears in the output.
check() {
    if ! grep -qF -- "$1" "$OUT"; then
        echo "$EXAMPLE output lacks: $1"
        cat "$OUT"
        exit 1
    fi
}

# check_count N TEXT: TEXT appears on exactly N lines.
check_count() {
    local n
    n=$(grep -cF -- "$2" "$OUT" || true)
    if [ "$n" != "$1" ]; then
        echo "$EXAMPLE output has '$2' on $n lines, expected $1"
        cat "$OUT"
        exit 1
    fi
}
