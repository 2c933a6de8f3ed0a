#!/usr/bin/env bash
# The Python client's suite (pytest) against the built broker.
set -euo pipefail
cd "$(dirname "$0")/../.."
source scripts/lib/venv.sh
python3 -m pytest -q Clients/python/tests
