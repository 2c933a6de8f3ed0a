#!/usr/bin/env bash
# Gate: the Python and JavaScript files pass their linters, as the Swift files pass
# `swift format lint` (02-format.sh): ruff (ruff.toml) and Biome (biome.json), the versions
# pinned in scripts/lib/python-tools.txt, which scripts/setup.sh installs into .build/venv.
# Reads only. `scripts/test.d/03-lint.sh --fix` formats every Python and JavaScript file,
# sorts their imports and applies the linters' safe fixes, in place.
# The formatters are checked too (ruff format, import order, Biome's formatter).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ -f scripts/lib/venv.sh ] || { echo "lint: scripts/lib/venv.sh is missing: the linters live in .build/venv"; exit 1; }
source scripts/lib/venv.sh

for tool in ruff biome; do
    command -v "$tool" >/dev/null || { echo "lint: $tool is missing; scripts/setup.sh installs it into .build/venv"; exit 1; }
done

if [ "${1:-}" = --fix ]; then
    timeout 300 ruff check --fix --quiet .
    timeout 300 ruff format --quiet .
    timeout 300 biome check --write --no-errors-on-unmatched
    echo "lint: formatted and fixed what needed it"
    exit 0
fi

status=0
timeout 300 ruff check --output-format concise . || status=1
timeout 300 ruff format --check . || status=1
timeout 300 biome ci --error-on-warnings || status=1
if [ $status -ne 0 ]; then
    echo "lint: the findings above need fixing (scripts/test.d/03-lint.sh --fix fixes what it safely can)"
    exit 1
fi
echo "lint: the Python and JavaScript files pass ruff and Biome (formatted as they say)"
