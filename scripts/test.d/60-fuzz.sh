#!/usr/bin/env bash
# slow
# Fuzzing: first replays the checked-in corpora with the ordinary build's fuzz programs (no
# libFuzzer: a regression run of every seed), then fuzzes each target for a minute with
# libFuzzer and AddressSanitizer (scripts/fuzz.sh). FUZZ_SECONDS overrides the minute.
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=$(swift build --show-bin-path)
for target in fuzz-decoder fuzz-core; do
    if [ ! -x "$bin/$target" ]; then
        echo "==> swift build --product $target"
        timeout 900 swift build --product "$target"
    fi
done
echo "==> corpus replay (ordinary build)"
timeout 300 "$bin/fuzz-decoder" Fuzz/corpus/decoder
timeout 300 "$bin/fuzz-core" Fuzz/corpus/core

timeout 1800 scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
