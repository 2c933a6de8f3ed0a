#!/usr/bin/env bash
# The shared protocol vectors and error table: generated files are current, and every
# message case plays against the live broker.
set -euo pipefail
cd "$(dirname "$0")/../.."
python3 Protocol/vectors/generate.py --check
python3 Clients/generate_error_table.py --check
python3 Protocol/vectors/play_messages.py --broker "${NOTIFBUS_BIN:-.build/debug/notifbus}"
