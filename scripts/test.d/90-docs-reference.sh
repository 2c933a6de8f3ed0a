#!/usr/bin/env bash
# The Swift client's DocC reference builds without warnings and documents every public symbol.
set -euo pipefail
cd "$(dirname "$0")/../.."
./scripts/docs.sh
