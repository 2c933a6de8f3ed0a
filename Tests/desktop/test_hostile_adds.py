"""`notifbus desktop` against adds an attacker would send, python-dbusmock on a private bus:
a userInfo of 100 arrays of 1,000 `1e9` (forwarded as its bytes, so the willPresent post and
the click's didReceive stay as small as the add, and the bridge's connection and other apps'
adds in flight are unharmed), and a userInfo nested 100,000 deep, shown, listed and removed with the bridge
still running. These frames are written by hand: the Python client would need recursion to
write or read a value that deep.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
from typing import List, Optional

from test_desktop_bridge import marker, ready

from conftest import WAIT, notification, wait_until


class RawClient:
    """One connection to the broker that writes frames as given and reads them as bytes."""

    def __init__(self, path: str) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(WAIT)
        self.sock.connect(path)
        self.next_id = 1
        self.send(b'{"op":"hello","id":0,"protocol":1,"name":"raw"}')
        assert b'"result"' in self.read()

    def send(self, body: bytes) -> None:
        self.sock.sendall(len(body).to_bytes(4, "big") + body)

    def read_exactly(self, n: int) -> bytes:
        data = bytearray()
        while len(data) < n:
            chunk = self.sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("the broker closed the connection")
            data += chunk
        return bytes(data)

    def read(self) -> bytes:
        return self.read_exactly(int.from_bytes(self.read_exactly(4), "big"))

    def invoke(self, method: str, arguments: bytes) -> bytes:
        """The reply to one invoke of the bridge's channel, as bytes."""
        rid = self.next_id
        self.next_id += 1
        self.send(
            b'{"op":"invoke","id":%d,"channel":"notifications","method":"%s","arguments":' % (rid, method.encode())
            + arguments
            + b"}"
        )
        reply = self.read()
        assert reply.startswith(b'{"op":"reply","id":%d,' % rid), reply[:200]
        return reply

    def close(self) -> None:
        self.sock.close()


class PayloadWatcher(threading.Thread):
    """An observer of willPresent and didReceive, first in their chains, on its own
    connection: keeps each event's bytes and answers next."""

    def __init__(self, path: str) -> None:
        super().__init__(daemon=True)
        self.client = RawClient(path)
        self.client.send(b'{"op":"subscribe","id":1,"events":["willPresent","didReceive"],"priority":0}')
        assert b'"result"' in self.client.read()
        self.frames: List[bytes] = []
        self.lock = threading.Lock()
        self.start()

    def run(self) -> None:
        try:
            while True:
                frame = self.client.read()
                event = re.match(rb'\{"op":"event","event":(\d+),', frame)
                if event is None:
                    continue
                with self.lock:
                    self.frames.append(frame)
                self.client.send(b'{"op":"next","event":%s}' % event.group(1))
        except (OSError, ConnectionError):
            return

    def payload_holding(self, *texts: bytes) -> Optional[bytes]:
        """The first event frame that holds every one of `texts`."""
        with self.lock:
            return next((f for f in self.frames if all(t in f for t in texts)), None)


def test_an_add_of_100_arrays_of_1000_numbers_is_forwarded_as_its_bytes(desktop):
    """The willPresent post carries the app's userInfo byte for byte (`1e9` stays `1e9`),
    so it is no larger than the add the broker accepted: the add is presented, and three
    other apps' adds waiting on the notification server meanwhile are answered normally."""
    channel = ready(desktop, flags=("--verbose",))
    watcher = PayloadWatcher(desktop.socket)
    user_info = b'{"big":[' + b",".join(b"[" + b",".join([b"1e9"] * 1000) + b"]" for _ in range(100)) + b"]}"
    arguments = b'{"identifier":"big","content":{"title":"t","userInfo":' + user_info + b"}}"
    assert len(arguments) > 400_000
    others = [desktop.channel() for _ in range(3)]
    results = {}
    desktop.server.send_signal(signal.SIGSTOP)
    try:
        threads = [
            threading.Thread(
                target=lambda i=i, ch=ch: results.__setitem__(i, ch.invoke_method("add", notification(f"other{i}")))
            )
            for i, ch in enumerate(others)
        ]
        for t in threads:
            t.start()
        wait_until(lambda: desktop.log().count("Notify(") == 3, "the other adds to wait on the server")
        raw = RawClient(desktop.socket)
        big: dict = {}
        sender = threading.Thread(target=lambda: big.setdefault("reply", raw.invoke("add", arguments)))
        sender.start()
        wait_until(lambda: watcher.payload_holding(b'"identifier":"big"'), "the big add's willPresent post")
    finally:
        desktop.server.send_signal(signal.SIGCONT)
    sender.join(WAIT)
    for t in threads:
        t.join(WAIT)
    reply = json.loads(big["reply"])
    assert reply["result"]["presented"] is True, reply
    assert [results[i]["presented"] for i in range(3)] == [True, True, True], results
    posted = watcher.payload_holding(b'"identifier":"big"')
    assert user_info in posted
    assert b"1000000000.0" not in posted
    assert len(posted) < len(arguments) + 200
    assert desktop.bridge.poll() is None
    assert "frame_too_large" not in desktop.log()
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"
    # A click on it posts didReceive with the same bytes, not a tree re-encoded 3 times larger.
    desktop.emit("ActionInvoked", "us", reply["result"]["desktopId"], "default")
    click = (b'"name":"didReceive"', b'"identifier":"big"')
    wait_until(lambda: watcher.payload_holding(*click), "the click's didReceive post")
    clicked = watcher.payload_holding(*click)
    assert user_info in clicked
    assert b"1000000000.0" not in clicked
    assert len(clicked) < len(arguments) + 300
    assert "frame_too_large" not in desktop.log() and "was refused" not in desktop.log()
    raw.close()
    watcher.client.close()


def test_a_userinfo_100000_deep_is_shown_listed_and_removed(desktop):
    """Building, forwarding, listing and freeing a userInfo 100,000 deep takes no stack in
    proportion: removeDeliveredNotifications answers and the bridge goes on serving."""
    channel = ready(desktop)
    deep = b"[" * 100_000 + b"1" + b"]" * 100_000
    raw = RawClient(desktop.socket)
    added = json.loads(
        raw.invoke("add", b'{"identifier":"deep","content":{"title":"t","userInfo":{"d":' + deep + b"}}}")
    )
    assert added["result"]["presented"] is True, added
    listed = raw.invoke("getDeliveredNotifications", b"null")
    assert b'"userInfo":{"d":' + deep + b"}" in listed
    assert channel.invoke_method("removeDeliveredNotifications", {"identifiers": ["deep"]}) == {"removed": ["deep"]}
    assert desktop.calls("CloseNotification") == [[added["result"]["desktopId"]]]
    assert channel.invoke_method("getDeliveredNotifications") == {"notifications": []}
    assert desktop.bridge.poll() is None
    assert marker(desktop, channel)["notification"]["identifier"] == "marker"
    raw.close()
