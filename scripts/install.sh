#!/usr/bin/env bash
# Installs the notifbus command for a user: builds it (release), then puts the binary, its
# man page, bash/zsh/fish completions and the systemd user units under a prefix. It
# changes nothing outside the prefix and starts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    cat <<'USAGE'
Usage: scripts/install.sh [--prefix DIR] [--debug]

Builds notifbus and installs, under DIR (default /usr/local):
  bin/notifbus                                  the broker and CLI (and its bridge tools, when built)
  share/man/man1/notifbus.1                     the manual page (notifbus manpage)
  share/bash-completion/completions/notifbus    bash completion
  share/zsh/site-functions/_notifbus            zsh completion
  share/fish/vendor_completions.d/notifbus.fish fish completion
  systemd user units notifbus.socket and notifbus.service, in share/systemd/user for a
  prefix inside $HOME (where 'systemctl --user' finds them) and lib/systemd/user otherwise

  --debug   build the debug configuration (faster to build, slower to run)

NOTIFBUS_BUILD_DIR=DIR uses the binaries already built in DIR instead of building.
USAGE
}

prefix=/usr/local
configuration=release
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) [ $# -ge 2 ] || { echo "install.sh: --prefix needs a folder" >&2; exit 2; }; prefix=$2; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --debug) configuration=debug; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install.sh: unknown option '$1'; see --help" >&2; exit 2 ;;
    esac
done
[ -n "$prefix" ] || { echo "install.sh: --prefix needs a folder" >&2; exit 2; }
case $prefix in /*) ;; *) prefix=$PWD/$prefix ;; esac

if [ -n "${NOTIFBUS_BUILD_DIR:-}" ]; then
    built=$NOTIFBUS_BUILD_DIR
else
    command -v swift >/dev/null || { echo "install.sh: swift is not on PATH (Swift 6 toolchain needed)" >&2; exit 1; }
    echo "building notifbus ($configuration)..."
    swift build -c "$configuration" --product notifbus
    built=$(swift build -c "$configuration" --show-bin-path)
fi
[ -x "$built/notifbus" ] || { echo "install.sh: no notifbus binary in $built" >&2; exit 1; }

case $prefix/ in
    "$HOME"/*) units=$prefix/share/systemd/user ;;
    *) units=$prefix/lib/systemd/user ;;
esac

install -d -m 0755 "$prefix/bin" "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d" "$units"
install -m 0755 "$built/notifbus" "$prefix/bin/notifbus"
for tool in notifbus-desktop notifbus-bridge; do
    if [ -x "$built/$tool" ]; then install -m 0755 "$built/$tool" "$prefix/bin/$tool"; fi
done
bin=$prefix/bin/notifbus
"$bin" manpage >"$prefix/share/man/man1/notifbus.1"
"$bin" completion bash >"$prefix/share/bash-completion/completions/notifbus"
"$bin" completion zsh >"$prefix/share/zsh/site-functions/_notifbus"
"$bin" completion fish >"$prefix/share/fish/vendor_completions.d/notifbus.fish"
install -m 0644 Examples/systemd/notifbus.socket "$units/notifbus.socket"
# The service runs the binary just installed, wherever the prefix is.
sed "s|^ExecStart=[^ ]*|ExecStart=$bin|" Examples/systemd/notifbus.service >"$units/notifbus.service"
chmod 0644 "$prefix/share/man/man1/notifbus.1" "$prefix"/share/*/completions/notifbus \
    "$prefix/share/zsh/site-functions/_notifbus" "$prefix/share/fish/vendor_completions.d/notifbus.fish" "$units/notifbus.service"

echo "installed $("$bin" --version) in $prefix:"
echo "  $bin"
echo "  $prefix/share/man/man1/notifbus.1, completions for bash, zsh and fish"
echo "    (bash loads the completion through the bash-completion package; without it, add"
echo "    'source $prefix/share/bash-completion/completions/notifbus' to ~/.bashrc)"
echo "  $units/notifbus.{socket,service}"
case :$PATH: in *:"$prefix/bin":*) ;; *) echo "add $prefix/bin to PATH: export PATH=\"$prefix/bin:\$PATH\"" ;; esac
