"""What the Python example programs share: printing a line at once, and running one
broker connection until it is done, with SIGTERM and SIGINT closing it and each failure
turned into one line on stderr and exit status 1. It must not decide anything an example
shows; that stays in the example.
"""

from __future__ import annotations

import signal
import sys
from typing import Any, Callable, NoReturn, Optional

import notifbus


def say(text: str) -> None:
    """Print ``text`` at once, so that the lines of several processes interleave in order."""
    print(text, flush=True)


class Terminated(Exception):
    """SIGTERM or SIGINT arrived: the program closes."""


def _on_signal(signum: int, _frame: Any) -> NoReturn:
    raise Terminated(signal.Signals(signum).name)


def run_client(program: str, speaker: str, name: str, serve: Callable[[notifbus.Client], int]) -> int:
    """Connect as ``name``, return what ``serve(bus)`` returns, and close the connection.

    ``program`` (the script's file name) starts each error line; ``speaker`` starts the
    line said when a signal closes the program. A lost connection, an error reply or an
    unreachable socket is exit status 1; a signal is 0.
    """
    signal.signal(signal.SIGTERM, _on_signal)
    signal.signal(signal.SIGINT, _on_signal)
    bus: Optional[notifbus.Client] = None
    try:
        bus = notifbus.connect(name=name)
        return serve(bus)
    except Terminated as why:
        say(f"{speaker}: closing ({why})")
        return 0
    except notifbus.ConnectionLost:
        return connection_lost(program)
    except (OSError, notifbus.NotifbusError) as exc:
        print(f"{program}: {exc}", file=sys.stderr)
        return 1
    finally:
        if bus is not None:
            bus.close()


def connection_lost(program: str) -> int:
    """Say on stderr that the broker's connection was lost; return exit status 1."""
    print(f"{program}: the connection to the broker was lost", file=sys.stderr)
    return 1
