#!/usr/bin/env bash
# The main job: installs what is missing, builds notifbus, then starts a broker with a
# short live demo of a shared notification delegate across processes.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
echo "==> swift build"
swift build
exec bash Examples/ChainDemo/run.sh
