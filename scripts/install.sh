#!/usr/bin/env bash
# Installs the notifbus command for a user: builds it and its two bridges (release), then
# puts the binaries, the man page, bash/zsh/fish completions and the systemd user units
# under a prefix. It changes nothing outside the prefix and starts nothing.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() {
    cat <<'USAGE'
Usage: scripts/install.sh [--prefix DIR] [--debug]

Builds notifbus and installs, under DIR (default /usr/local):
  bin/notifbus                                  the broker and CLI
  bin/notifbus-desktop                          the desktop bridge ('notifbus desktop')
  bin/notifbus-bridge                           the NATS bridge ('notifbus bridge nats')
  share/man/man1/notifbus.1                     the manual page (notifbus manpage), with
                                                'desktop' and 'bridge' in it
  share/bash-completion/completions/notifbus    bash completion
  share/zsh/site-functions/_notifbus            zsh completion
  share/fish/vendor_completions.d/notifbus.fish fish completion
  systemd user units notifbus.socket, notifbus.service and notifbus-desktop.service
  (started with the graphical session, once enabled), in share/systemd/user for a
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
    for product in notifbus notifbus-desktop notifbus-bridge; do
        echo "building $product ($configuration)..."
        swift build -c "$configuration" --product "$product"
    done
    built=$(swift build -c "$configuration" --show-bin-path)
fi
tools=(notifbus notifbus-desktop notifbus-bridge)
for tool in "${tools[@]}"; do
    [ -x "$built/$tool" ] || { echo "install.sh: no $tool binary in $built" >&2; exit 1; }
done

case $prefix/ in
    "$HOME"/*) units=$prefix/share/systemd/user ;;
    *) units=$prefix/lib/systemd/user ;;
esac

install -d -m 0755 "$prefix/bin" "$prefix/share/man/man1" "$prefix/share/bash-completion/completions" \
    "$prefix/share/zsh/site-functions" "$prefix/share/fish/vendor_completions.d" "$units"
# The bridges first: the man page and the completions read their help beside notifbus.
for tool in "${tools[@]}"; do install -m 0755 "$built/$tool" "$prefix/bin/$tool"; done
bin=$prefix/bin/notifbus
"$bin" manpage >"$prefix/share/man/man1/notifbus.1"
"$bin" completion bash >"$prefix/share/bash-completion/completions/notifbus"
"$bin" completion zsh >"$prefix/share/zsh/site-functions/_notifbus"
"$bin" completion fish >"$prefix/share/fish/vendor_completions.d/notifbus.fish"
install -m 0644 Examples/systemd/notifbus.socket "$units/notifbus.socket"
# The services run the binary just installed, wherever the prefix is.
for unit in notifbus.service notifbus-desktop.service; do
    sed "s|^ExecStart=[^ ]*|ExecStart=$bin|" "Examples/systemd/$unit" >"$units/$unit"
done
chmod 0644 "$prefix/share/man/man1/notifbus.1" "$prefix"/share/*/completions/notifbus \
    "$prefix/share/zsh/site-functions/_notifbus" "$prefix/share/fish/vendor_completions.d/notifbus.fish" \
    "$units/notifbus.service" "$units/notifbus-desktop.service"

echo "installed $("$bin" --version) in $prefix:"
echo "  $bin, $prefix/bin/notifbus-desktop, $prefix/bin/notifbus-bridge"
echo "  $prefix/share/man/man1/notifbus.1, completions for bash, zsh and fish"
echo "    (bash loads the completion through the bash-completion package; without it, add"
echo "    'source $prefix/share/bash-completion/completions/notifbus' to ~/.bashrc)"
echo "  $units/notifbus.{socket,service}, $units/notifbus-desktop.service"
case :$PATH: in *:"$prefix/bin":*) ;; *) echo "add $prefix/bin to PATH: export PATH=\"$prefix/bin:\$PATH\"" ;; esac
