#!/usr/bin/env bash
# The main job: installs what is missing to build (scripts/setup.sh --build), builds
# notifbus, then starts a broker with a short live demo of a shared notification delegate
# across processes. Runs as any user; only root installs Debian packages.
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh --build
echo "==> swift build"
swift build
exec bash Examples/ChainDemo/run.sh
