# Sourced by the scripts, test steps and examples that run Python: puts the checkout's
# virtual environment (.build/venv, made by scripts/setup.sh) first on PATH, so that
# `python3` has the test tools and Debian's D-Bus modules. Without one, PATH is left as it is.
_notifbus_venv="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)/.build/venv"
if [ -x "$_notifbus_venv/bin/python3" ]; then
    case ":$PATH:" in
        *":$_notifbus_venv/bin:"*) ;;
        *) export PATH="$_notifbus_venv/bin:$PATH" ;;
    esac
    export VIRTUAL_ENV="$_notifbus_venv"
fi
unset _notifbus_venv
