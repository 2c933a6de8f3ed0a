#!/usr/bin/env bash
# Installs what a fresh machine lacks to build and test notifbus (with --build: only to
# build it and run the demo), and changes nothing else.
# Debian packages (libevent, sd-bus and cnats headers, the D-Bus daemon, python-dbusmock,
# dunst, Xvfb, nats-server, ...) are installed only by root; anyone else is shown the one
# 'sudo apt-get install' line that is missing, and setup stops. The Python test tools
# (scripts/lib/python-tools.txt: pytest, nats-py, jsonschema) go into a virtual environment
# of the checkout's own, .build/venv, never into the system's Python (PEP 668). It sees
# Debian's python3 modules too (dbus, gi, dbusmock: the desktop tests need them). The
# scripts put it first on PATH (scripts/lib/venv.sh). Safe to run again; quick when all is there.
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages by what they provide. To build (`swift build`, the demo): libevent for the
# broker, sd-bus and cnats for the bridges, Python for the examples' small scripts, and
# venv, in which the README installs the Python client.
build_packages=(pkg-config libevent-dev libsystemd-dev libnats-dev python3 python3-venv)
# To test as well: the desktop bridge's (a session bus, a fake and two real notification
# servers, gdbus, a virtual display), the NATS bridge's (nats-server), the benchmark's
# instruction counts (valgrind) and its D-Bus peers (dbus-broker beside dbus), the shells
# whose completion scripts the CLI tests load (zsh, fish), and venv with the D-Bus modules
# the desktop tests import.
test_packages=(dbus python3-dbusmock dunst xvfb x11-utils imagemagick nats-server valgrind notification-daemon
    libglib2.0-bin dbus-broker zsh fish python3-dbus python3-gi)
case ${1:-} in
    --build) packages=("${build_packages[@]}") ;;
    "") packages=("${build_packages[@]}" "${test_packages[@]}") ;;
    *) echo "usage: scripts/setup.sh [--build]   (--build: only what building and the demo need)" >&2; exit 2 ;;
esac
need_apt=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || need_apt+=("$p")
done
if [ ${#need_apt[@]} -gt 0 ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "setup: Debian packages are missing; install them (as root), then run this again:" >&2
        echo "  sudo apt-get install -y ${need_apt[*]}" >&2
        exit 1
    fi
    echo "setup: installing ${need_apt[*]} from Debian"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

[ "${1:-}" = --build ] && exit 0

# The virtual environment. Debian's python3 (the one with the packages above), not
# whichever python3 comes first on PATH.
venv=.build/venv
tools=scripts/lib/python-tools.txt
base=/usr/bin/python3
[ -x "$base" ] || base=$(command -v python3) || { echo "setup: no python3 found" >&2; exit 1; }
if [ ! -x "$venv/bin/python3" ] || ! "$venv/bin/python3" -c "" 2>/dev/null; then
    echo "setup: making the Python virtual environment $venv (from $base)"
    rm -rf "$venv"
    mkdir -p .build
    "$base" -m venv --system-site-packages "$venv"
fi
# Installed again only when the list differs from the one installed last.
stamp=$venv/.python-tools-installed
if ! cmp -s "$tools" "$stamp"; then
    echo "setup: installing the Python test tools into $venv from PyPI: $(grep -v '^#' "$tools" | tr '\n' ' ')"
    "$venv/bin/python3" -m pip install --quiet --disable-pip-version-check -r "$tools"
    cp "$tools" "$stamp"
fi
