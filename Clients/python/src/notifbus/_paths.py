"""Where the broker's socket is: protocol v1 §1, in the order the broker itself uses.

Only computes a path and words connection errors; connecting is the clients' job.
"""

from __future__ import annotations

import os
import stat
from typing import Mapping, Optional, Union

#: File name of the socket inside ``$XDG_RUNTIME_DIR``.
SOCKET_NAME = "notifbus.sock"


def resolve_socket_path(
    socket: Optional[Union[str, "os.PathLike[str]"]] = None,
    environ: Optional[Mapping[str, str]] = None,
    uid: Optional[int] = None,
) -> str:
    """Return the socket path: ``socket`` if given, else ``NOTIFBUS_SOCKET``, else
    ``$XDG_RUNTIME_DIR/notifbus.sock``, else ``/tmp/notifbus-$UID/notifbus.sock``.

    Empty environment variables count as unset.
    """
    if socket is not None:
        return os.fspath(socket)
    env = os.environ if environ is None else environ
    explicit = env.get("NOTIFBUS_SOCKET")
    if explicit:
        return explicit
    runtime_dir = env.get("XDG_RUNTIME_DIR")
    if runtime_dir:
        return os.path.join(runtime_dir, SOCKET_NAME)
    user = os.getuid() if uid is None else uid
    return f"/tmp/notifbus-{user}/{SOCKET_NAME}"


def socket_error(exc: OSError, path: str) -> OSError:
    """``exc`` from connecting to ``path``, of the same type, with the path in it and,
    when ``path`` exists but is no socket, what it is instead."""
    reason = exc.strerror or str(exc)
    try:
        mode: Optional[int] = os.stat(path).st_mode
    except OSError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        reason = "is a folder, not a socket (give the socket's path inside it)"
    elif mode is not None and not stat.S_ISSOCK(mode):
        reason = "is not a socket"
    if exc.errno is None:
        return type(exc)(f"{reason}: {path!r}")
    return type(exc)(exc.errno, reason, path)
