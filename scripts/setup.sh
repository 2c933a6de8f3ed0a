#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test notifbus: libevent, sd-bus and cnats
# headers, the D-Bus daemon, python-dbusmock, dunst, Xvfb and nats-server from Debian, pytest
# from PyPI. Safe to run again; does nothing when all is there.
set -euo pipefail

# Debian packages by what they provide: the broker (libevent), the desktop bridge (sd-bus,
# a session bus, a fake and two real notification servers, gdbus, a virtual display), the NATS bridge
# (cnats, nats-server), the benchmark's instruction counts (valgrind) and its D-Bus peers
# (dbus-broker beside dbus), and the shells whose completion scripts the CLI tests load (zsh, fish).
packages=(pkg-config libevent-dev libsystemd-dev dbus python3-dbusmock dunst xvfb x11-utils
    imagemagick libnats-dev nats-server valgrind notification-daemon libglib2.0-bin dbus-broker zsh fish)
need_apt=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$p")
done
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
# nats-py drives the NATS bridge's tests, example and benchmark (the servers' side); tests only.
if ! python3 -c "import nats" >/dev/null 2>&1; then
    echo "setup: installing nats-py from PyPI"
    python3 -m pip install --quiet --disable-pip-version-check nats-py
fi
