#!/usr/bin/env bash
# The JavaScript client's suite (node --test) against the built broker.
set -euo pipefail
cd "$(dirname "$0")/../../Clients/js"
node --test
