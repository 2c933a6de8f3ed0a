#!/usr/bin/env bash
# Gate: every Swift file of the package is formatted as .swift-format says (`swift format
# lint --strict`, bundled with the toolchain). Reads only. To fix what it reports, run
# `scripts/test.d/02-format.sh --fix`, which rewrites the same files in place.
set -euo pipefail
cd "$(dirname "$0")/../.."
files=()
while IFS= read -r -d '' f; do files+=("$f"); done < <(
    find Package.swift Sources Tests Benchmarks Fuzz Examples -name '.build*' -prune -o -name '*.swift' -print0 | sort -z)
if [ "${1:-}" = --fix ]; then
    timeout 600 swift format format --in-place --parallel --configuration .swift-format "${files[@]}"
    echo "format: rewrote what needed it among ${#files[@]} Swift files"
    exit 0
fi
if ! timeout 600 swift format lint --strict --parallel --configuration .swift-format "${files[@]}"; then
    echo "format: the files above differ from .swift-format; fix them with: scripts/test.d/02-format.sh --fix"
    exit 1
fi
echo "format: ${#files[@]} Swift files match .swift-format"
