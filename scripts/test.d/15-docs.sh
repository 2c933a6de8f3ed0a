#!/usr/bin/env bash
# Every code block of README.md, Clients/python/README.md and Clients/js/README.md runs as
# written (scripts/lib/check_docs.py says how each language is run and what may be skipped).
set -euo pipefail
cd "$(dirname "$0")/../.."
timeout 600 python3 scripts/lib/check_docs.py
