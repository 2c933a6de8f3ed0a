#!/usr/bin/env bash
# slow
# The Swift test suites under AddressSanitizer and ThreadSanitizer.
set -euo pipefail
cd "$(dirname "$0")/../.."
./scripts/sanitizers.sh asan tsan
