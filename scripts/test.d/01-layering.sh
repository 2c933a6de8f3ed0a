#!/usr/bin/env bash
# Gate: every Swift module imports and calls only what its layer allows, and only what
# Package.swift declares (scripts/lib/layering.py). The checker first proves on its planted
# fixture that it still finds each kind of break. Reads sources only; changes nothing.
set -euo pipefail
cd "$(dirname "$0")/../.."
timeout 120 python3 scripts/lib/layering.py --self-test
timeout 300 python3 scripts/lib/layering.py
