"""Where the broker's socket is: protocol v1 §1, in the order the broker itself uses.

Only computes a path; connecting is the clients' job.
"""

from __future__ import annotations

import os
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
