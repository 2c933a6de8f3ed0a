#!/usr/bin/env bash
# slow
# Fuzzing: first replays the checked-in corpora with the ordinary build's fuzz programs (no
# libFuzzer: a regression run of every seed), runs fuzz-core's seeded explorer, the NATS
# bridge's seeds with a crash before every step and the bridge's seeded explorer (FUZZ_SEED
# repeats a run), then fuzzes each target for a minute with
# libFuzzer and AddressSanitizer (scripts/fuzz.sh). FUZZ_SECONDS overrides the minute.
set -euo pipefail
cd "$(dirname "$0")/../.."

bin=$(swift build --show-bin-path)
for target in fuzz-decoder fuzz-core fuzz-bridge; do
    if [ ! -x "$bin/$target" ]; then
        echo "==> swift build --product $target"
        timeout 900 swift build --product "$target"
    fi
done
echo "==> corpus replay (ordinary build)"
timeout 300 "$bin/fuzz-decoder" Fuzz/corpus/decoder
timeout 300 "$bin/fuzz-core" Fuzz/corpus/core
timeout 300 "$bin/fuzz-bridge" Fuzz/corpus/bridge
# fuzz-core's seeded explorer: random programs leaning on idempotency keys, held and failed
# writes and restarts (Fuzz/fuzz-core/Explorer.swift); a failure prints the seed and the program.
seed=${FUZZ_SEED:-$(date +%s)}
echo "==> fuzz-core --explore 2000 --seed $seed"
timeout 600 "$bin/fuzz-core" --explore 2000 --seed "$seed"
# The NATS bridge's exactly-once machine against models of JetStream and the broker
# (Fuzz/BridgeSimulation): each seed with a bridge kill, a broker kill and a broker stop
# before each step, then random programs; a failure prints the seed and the program.
echo "==> fuzz-bridge --crash-every-step"
timeout 600 "$bin/fuzz-bridge" --crash-every-step
echo "==> fuzz-bridge --explore 5000 --seed $seed"
timeout 600 "$bin/fuzz-bridge" --explore 5000 --seed "$seed"

timeout 1800 scripts/fuzz.sh "${FUZZ_SECONDS:-60}"
