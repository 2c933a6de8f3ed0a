#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test notifbus: libevent's headers and
# pkg-config from Debian, pytest from PyPI. Safe to run again; does nothing when all is there.
set -euo pipefail

need_apt=()
pkg-config --exists libevent_core 2>/dev/null || need_apt+=(libevent-dev)
command -v pkg-config >/dev/null 2>&1 || need_apt+=(pkg-config)
if [ ${#need_apt[@]} -gt 0 ]; then
    echo "setup: installing ${need_apt[*]} from Debian"
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO="sudo"
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if ! python3 -c "import pytest" >/dev/null 2>&1; then
    echo "setup: installing pytest from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check pytest
fi
