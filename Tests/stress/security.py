#!/usr/bin/env python3
"""Security checks of the broker: who may connect, file and folder modes, planted paths,
and every limit with the error it answers.

Needs root for the uid checks (a child drops to uid 65534 with os.setuid and runs under
/usr/bin/python3, since root's pyenv is not readable by other users); those are skipped
when not run as root. `-k WORD` runs only the checks whose name contains WORD.

Each check starts its own broker on a fresh temporary folder, except the default-folder
check, which uses /tmp/notifbus-$UID and skips when a broker already listens there.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import socket
import stat
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import stresslib as sl  # noqa: E402

NOBODY = 65534
SYSTEM_PYTHON = "/usr/bin/python3"
MAX_OUTPUT = 16 << 20

#: Run by /usr/bin/python3 as root, it drops to uid/gid 65534 and then talks to the broker.
#: argv: socket path, "hold" seconds to keep the socket open after the first frame.
#: Prints one JSON line per event: the connect result, each frame, then eof or timeout.
UID_CHILD = r"""
import json, os, socket, struct, sys, time
os.setgroups([]); os.setgid(65534); os.setuid(65534)
path, hold = sys.argv[1], float(sys.argv[2])
def out(**kw):
    sys.stdout.write(json.dumps(kw) + "\n"); sys.stdout.flush()
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
try:
    s.connect(path)
except OSError as e:
    out(connect=e.errno); sys.exit(0)
out(connect=0, uid=os.getuid())
def frame(m):
    b = json.dumps(m).encode(); return struct.pack(">I", len(b)) + b
try:
    s.sendall(frame({"op": "hello", "id": 1, "protocol": 1, "name": "nobody"}) + frame({"op": "status", "id": 2}))
except OSError as e:
    out(send=e.errno)
buf = b""; first = True; frames = 0
deadline = time.time() + 5
while time.time() < deadline:
    try:
        d = s.recv(65536)
    except socket.timeout:
        out(timeout=True); break
    except OSError as e:
        out(error=e.errno); break
    if not d:
        out(eof=True); break
    buf += d
    while len(buf) >= 4 and len(buf) >= 4 + struct.unpack(">I", buf[:4])[0]:
        n = struct.unpack(">I", buf[:4])[0]
        out(frame=json.loads(buf[4:4 + n])); buf = buf[4 + n:]
        if first:
            first = False; time.sleep(hold)
        frames += 1
        deadline = time.time() + 3
    if frames == 2:
        break
"""


class Context:
    def __init__(self, folder: str, binary: str) -> None:
        self.folder = folder
        self.binary = binary
        self.n = 0
        self.is_root = os.geteuid() == 0
        # Traversable by uid 65534, so that only the socket's own mode decides who connects.
        os.chmod(folder, 0o755)

    def sub(self, name: str, mode: int = 0o700) -> str:
        self.n += 1
        path = os.path.join(self.folder, f"{self.n}-{name}")
        os.mkdir(path)
        os.chmod(path, mode)
        return path

    def broker(self, name: str, args: List[str] = (), mode: int = 0o700, start: bool = True) -> sl.Broker:
        b = sl.Broker(self.binary, self.sub(name, mode), list(args))
        return b.start() if start else b


def uid_child(path: str, hold: float = 0.0) -> subprocess.Popen:
    return sl.track(
        subprocess.Popen(
            [SYSTEM_PYTHON, "-c", UID_CHILD, path, str(hold)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd="/",
            env={"PATH": "/usr/bin:/bin"},
        )
    )


def child_lines(p: subprocess.Popen, timeout: float = 15) -> List[Dict[str, Any]]:
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        out, err = p.communicate()
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    if err.strip():
        lines.append({"stderr": err.strip()[-300:]})
    return lines


def mode_of(path: str) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def run_broker_once(
    binary: str,
    args: List[str],
    timeout: float = 10,
    env: Optional[Dict[str, str]] = None,
    preexec: Optional[Callable[[], None]] = None,
) -> subprocess.CompletedProcess:
    """Runs a broker expected to refuse to start; kills it if it does start."""
    try:
        return subprocess.run(
            [binary, "broker", *args], capture_output=True, text=True, timeout=timeout, env=env, preexec_fn=preexec
        )
    except subprocess.TimeoutExpired as exc:
        return subprocess.CompletedProcess(exc.cmd, -1, "", f"still running after {timeout} s")


# MARK: who may connect


def check_socket_mode(checks: sl.Checks, ctx: Context) -> None:
    b = ctx.broker("mode", mode=0o755)
    checks.check("socket file mode is 0600 by default", mode_of(b.socket) == 0o600, oct(mode_of(b.socket)))
    if ctx.is_root:
        lines = child_lines(uid_child(b.socket))
        checks.check(
            "with 0600, uid 65534 cannot even connect (EACCES)",
            lines[:1] == [{"connect": errno.EACCES}],
            str(lines)[:300],
        )
    b.terminate()
    b = ctx.broker("mode660", ["--socket-mode", "0660"])
    checks.check("--socket-mode 0660 gives 0660", mode_of(b.socket) == 0o660, oct(mode_of(b.socket)))
    b.terminate()


def check_forbidden(checks: sl.Checks, ctx: Context) -> None:
    if not ctx.is_root:
        return checks.skip("forbidden for another uid", "needs root to drop to uid 65534")
    if not os.access(SYSTEM_PYTHON, os.X_OK):
        return checks.skip("forbidden for another uid", f"{SYSTEM_PYTHON} missing")
    b = ctx.broker("forbidden", ["--socket-mode", "0666", "--max-clients", "2"], mode=0o755)
    holder = sl.Conn(b.socket)
    holder.hello("root-holder")
    p = uid_child(b.socket, hold=1.0)
    first = p.stdout.readline()
    first_frame = p.stdout.readline()
    # While the refused peer still holds its socket open, the two places are root's.
    with sl.Conn(b.socket) as second:
        second_reply = second.hello("root-second")
        with sl.Conn(b.socket) as third:
            try:
                third_frame = third.recv(3)
            except (sl.Closed, sl.Timeout) as exc:
                third_frame = {"exception": repr(exc)}
    lines = [json.loads(first), json.loads(first_frame)] + child_lines(p)
    frames = [x["frame"] for x in lines if "frame" in x]
    checks.check(
        "uid 65534 gets forbidden (id null) and is closed",
        lines[0].get("connect") == 0
        and len(frames) == 1
        and frames[0].get("id") is None
        and sl.error_code(frames[0]) == "forbidden"
        and {"eof": True} in lines,
        str(lines)[:400],
    )
    checks.check(
        "forbidden is decided before --max-clients, and not counted",
        "result" in second_reply and sl.error_code(third_frame) == "too_many_clients",
        f"second root client: {second_reply.get('result', second_reply)}; third: {third_frame}",
    )
    status = sl.full_status(holder)
    checks.check(
        "the refused peer never appears in status",
        all(c["uid"] != NOBODY for c in status["clients"]),
        str(status["clients"]),
    )
    holder.close()
    b.terminate()

    b = ctx.broker("allowed", ["--socket-mode", "0666", "--allow-uid", str(NOBODY)], mode=0o755)
    lines = child_lines(uid_child(b.socket))
    frames = [x["frame"] for x in lines if "frame" in x]
    uids = [c["uid"] for c in frames[1]["result"]["clients"]] if len(frames) > 1 and "result" in frames[1] else []
    checks.check(
        "--allow-uid 65534 lets uid 65534 in",
        len(frames) == 2 and "result" in frames[0] and uids == [NOBODY],
        str(lines)[:300],
    )
    b.terminate()


def check_default_folder(checks: sl.Checks, ctx: Context) -> None:
    uid = os.getuid()
    folder = f"/tmp/notifbus-{uid}"
    path = f"{folder}/notifbus.sock"
    env = {k: v for k, v in os.environ.items() if k not in ("NOTIFBUS_SOCKET", "XDG_RUNTIME_DIR")}
    if os.path.exists(path):
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.settimeout(1)
                s.connect(path)
            return checks.skip("default folder created 0700", f"a broker is already listening on {path}")
        except OSError:
            pass
    existed = os.path.isdir(folder)
    b = sl.Broker(ctx.binary, ctx.sub("default-log"), env=env)
    b.socket = path
    b.start(with_socket=False)
    st = os.lstat(folder)
    if existed:
        checks.skip(
            "default folder is created with mode 0700", f"{folder} existed already (mode {oct(mode_of(folder))})"
        )
    else:
        checks.check(
            "default folder is created with mode 0700",
            stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == uid,
            f"{folder}: mode {oct(stat.S_IMODE(st.st_mode))}, owner {st.st_uid}",
        )
    checks.check("default socket is mode 0600", mode_of(path) == 0o600, oct(mode_of(path)))
    rc = b.terminate()
    checks.check("default broker exits 0 and removes its socket", rc == 0 and not os.path.exists(path), f"rc {rc}")
    if not existed:
        try:
            os.rmdir(folder)
        except OSError:
            pass
    # A default folder with group or other access is refused: shown with uid 65534's own
    # default folder, so that nobody else's is touched.
    if not ctx.is_root:
        return
    other = f"/tmp/notifbus-{NOBODY}"
    if os.path.lexists(other):
        return checks.skip("a loose default folder is refused", f"{other} exists")
    os.mkdir(other, 0o755)
    try:
        os.chown(other, NOBODY, NOBODY)
        os.chmod(other, 0o755)

        def drop() -> None:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)

        r = run_broker_once(ctx.binary, [], env={"PATH": "/usr/bin:/bin", "HOME": "/"}, preexec=drop)
        checks.check(
            "a default folder with mode 0755 is refused (exit 1)",
            r.returncode == 1 and "0700" in r.stderr and not os.path.exists(other + "/notifbus.sock"),
            f"rc {r.returncode}: {r.stderr.strip()[:200]}",
        )
    finally:
        shutil.rmtree(other, ignore_errors=True)


# MARK: planted paths


def check_socket_folders(checks: sl.Checks, ctx: Context) -> None:
    if ctx.is_root:
        d = ctx.sub("theirs", 0o755)
        os.chown(d, NOBODY, NOBODY)
        r = run_broker_once(ctx.binary, ["--socket", d + "/s"])
        checks.check(
            "refuses a socket folder another user owns",
            r.returncode == 1 and "owned by uid" in r.stderr and not os.path.exists(d + "/s"),
            f"rc {r.returncode}: {r.stderr.strip()[:200]}",
        )
    else:
        checks.skip("refuses a socket folder another user owns", "needs root to chown")
    d = ctx.sub("open", 0o777)
    r = run_broker_once(ctx.binary, ["--socket", d + "/s"])
    checks.check(
        "refuses a socket folder others can write (0777)",
        r.returncode == 1 and "write" in r.stderr and not os.path.exists(d + "/s"),
        f"rc {r.returncode}: {r.stderr.strip()[:200]}",
    )
    d = ctx.sub("sticky", 0o1777)
    b = sl.Broker(ctx.binary, d)
    try:
        b.start()
        checks.check("accepts a sticky shared folder (1777, like /tmp)", b.alive())
    except RuntimeError as exc:
        checks.check("accepts a sticky shared folder (1777, like /tmp)", False, str(exc)[:200])
    b.terminate()
    real = ctx.sub("real")
    link = os.path.join(ctx.folder, "link-folder")
    os.symlink(real, link)
    r = run_broker_once(ctx.binary, ["--socket", link + "/s"])
    checks.check(
        "refuses a socket folder that is a symbolic link",
        r.returncode == 1 and not os.path.exists(real + "/s"),
        f"rc {r.returncode}: {r.stderr.strip()[:200]}",
    )
    d = ctx.sub("file")
    with open(d + "/s", "w") as f:
        f.write("keep me")
    r = run_broker_once(ctx.binary, ["--socket", d + "/s"])
    with open(d + "/s") as f:
        kept = f.read() == "keep me"
    checks.check(
        "refuses a path that is a regular file, leaving it alone",
        r.returncode == 1 and kept,
        f"rc {r.returncode}: {r.stderr.strip()[:200]}",
    )
    os.symlink(d + "/s", d + "/ln")
    r = run_broker_once(ctx.binary, ["--socket", d + "/ln"])
    checks.check(
        "refuses a path that is a symbolic link, leaving it alone",
        r.returncode == 1 and os.path.islink(d + "/ln"),
        f"rc {r.returncode}: {r.stderr.strip()[:200]}",
    )
    b = ctx.broker("live")
    r = run_broker_once(ctx.binary, ["--socket", b.socket])
    with sl.Conn(b.socket) as c:
        still = "result" in c.hello()
    checks.check(
        "refuses a path where a broker listens; that broker keeps serving",
        r.returncode == 1 and still,
        f"rc {r.returncode}: {r.stderr.strip()[:200]}",
    )
    b.terminate()
    d = ctx.sub("stale")
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(d + "/s")
    stale.close()
    b = sl.Broker(ctx.binary, d, socket_path=d + "/s")
    try:
        b.start()
        with sl.Conn(b.socket) as c:
            checks.check("replaces a stale socket", "result" in c.hello())
    except RuntimeError as exc:
        checks.check("replaces a stale socket", False, str(exc)[:200])
    b.terminate()


def check_state_dir(checks: sl.Checks, ctx: Context) -> None:
    parent = ctx.sub("state-parent")
    state_dir = os.path.join(parent, "state")
    b = sl.Broker(ctx.binary, parent, ["--state-dir", state_dir]).start()
    with sl.Conn(b.socket) as c:
        c.hello()
        c.request("put", slot="x", value={"secret": 1})
        c.request("setCategories", categories=[{"identifier": "C", "actions": []}])
    files = {name: mode_of(os.path.join(state_dir, name)) for name in os.listdir(state_dir)}
    checks.check("--state-dir is created with mode 0700", mode_of(state_dir) == 0o700, oct(mode_of(state_dir)))
    checks.check(
        "state files are mode 0600",
        files and all(m == 0o600 for m in files.values()),
        str({k: oct(v) for k, v in files.items()}),
    )
    b.terminate()

    # A state folder someone else can write to: a link planted where the broker writes its
    # compacted journal must not make it overwrite the link's target.
    d = ctx.sub("state-open", 0o777)
    victim = os.path.join(ctx.sub("victim"), "victim")
    with open(victim, "w") as f:
        f.write("precious")
    os.symlink(victim, os.path.join(d, "state.journal.tmp"))
    b = sl.Broker(ctx.binary, ctx.sub("state-open-sock"), ["--state-dir", d])
    try:
        b.start()
    except RuntimeError:
        pass
    b.terminate()
    with open(victim, "rb") as f:
        content = f.read()
    checks.check(
        "a symlink planted in a writable --state-dir is not written through",
        content == b"precious",
        f"the link's target now holds {content[:16]!r}; the broker "
        + ("started" if "listening" in b.log() else f"refused: {b.log().strip()[:150]}"),
    )


# MARK: limits


def flood_seen(checks: sl.Checks, ctx: Context) -> None:
    """Monitors that never read while another client posts large payloads."""
    b = ctx.broker("flood-seen")
    base = b.rss_kib()
    watchers = []
    for _ in range(4):
        w = sl.Conn(b.socket)
        w.hello("watcher")
        w.send({"op": "monitor", "id": 2})
        watchers.append(w)
    big = {"blob": "z" * 500_000}
    started = time.monotonic()
    posts, answered = 0, 0
    with sl.Conn(b.socket) as flooder:
        flooder.hello("flooder")
        while time.monotonic() - started < 30 and not all(sl.peer_hung_up(w.sock) for w in watchers):
            posts += 1
            answered += "result" in flooder.request("post", name="nobody.listens", payload=big, timeout=10)
        elapsed = time.monotonic() - started
        pong = "result" in flooder.request("ping")
    cut = sum(sl.peer_hung_up(w.sock, 1.0) for w in watchers)
    peak = b.hwm_kib()
    bound = base + 4 * 2 * (MAX_OUTPUT >> 10) + 64 * 1024
    # Lines of one kind are written at most once a second; the held ones a second later.
    sl.wait_until(lambda: sl.log_count(b.log(), "cut off") >= 4, 3.0)
    checks.check(
        "monitors that never read are cut off (seen frames)",
        cut == 4 and sl.log_count(b.log(), "cut off") >= 4,
        f"{cut} of 4 cut after {posts} posts of 500 kB, {elapsed:.1f} s",
    )
    checks.check("the flooding client itself is served normally", answered == posts and pong)
    checks.check(
        "broker RSS bounded while cutting them off",
        peak <= bound,
        f"peak {sl.mib(peak)} <= {sl.mib(bound)} (start {sl.mib(base)} + 4 x 2 x --max-output + 64 MiB)",
    )
    for w in watchers:
        w.close()
    b.terminate()


def flood_events(checks: sl.Checks, ctx: Context) -> None:
    """An observer that never reads (but writes) while its chain gets large events."""
    b = ctx.broker("flood-events", ["--hop-timeout", "20ms"])
    base = b.rss_kib()
    sink = sl.Conn(b.socket)
    sink.hello("sink")
    observer = sink.request("subscribe", events=["flood"])["result"]["observer"]
    big = {"blob": "e" * 500_000}
    posts, traces = 0, []
    started = time.monotonic()
    with sl.Conn(b.socket) as flooder:
        flooder.hello("flooder")
        while time.monotonic() - started < 30 and not sl.peer_hung_up(sink.sock):
            # A peer that sends nothing after its hop timed out is skipped from then on
            # (decision 30) and holds one event frame. This one writes a ping each round
            # but never reads, so the events keep coming until its output is cut off.
            sink.send({"op": "ping", "id": posts})
            time.sleep(0.002)  # the ping first: a post read before it would skip the sink
            reply = flooder.request("post", name="flood", payload=big, timeout=10)
            posts += 1
            traces.append([t["reply"] for t in reply["result"]["trace"]])
        after = flooder.request("post", name="flood", payload=big)["result"]
        status = sl.full_status(flooder)
    peak = b.hwm_kib()
    bound = base + 2 * (MAX_OUTPUT >> 10) + 64 * 1024
    checks.check(
        "an observer that never reads is cut off (event frames)",
        sl.peer_hung_up(sink.sock, 1.0),
        f"after {posts} events of 500 kB in {time.monotonic() - started:.1f} s",
    )
    checks.check(
        "its hops time out until then (or skip it, had its ping not come first), and its observer is gone after",
        all(t in (["timeout"], ["gone"], ["skipped"]) for t in traces)
        and after["trace"] == []
        and all(o["observer"] != observer for o in status["observers"]),
        f"traces {traces[:2]}...{traces[-2:]}, next {after['trace']}",
    )
    checks.check("broker RSS bounded", peak <= bound, f"peak {sl.mib(peak)} <= {sl.mib(bound)}")
    sink.close()
    b.terminate()


def flood_replies(checks: sl.Checks, ctx: Context) -> None:
    """A client that sends requests and never reads the replies."""
    b = ctx.broker("flood-replies")
    c = sl.Conn(b.socket)
    c.hello()
    c.request("put", slot="big", value="r" * 500_000)
    frame = sl.encode({"op": "peek", "id": 9, "slot": "big"})
    sent = 0
    started = time.monotonic()
    try:
        while sent < 200 and not sl.peer_hung_up(c.sock):
            c.send_raw(frame)
            sent += 1
    except OSError:
        pass
    cut = sl.peer_hung_up(c.sock, 5.0)
    checks.check(
        "a client that never reads its replies is cut off",
        cut,
        f"after {sent} peeks of a 500 kB slot, {time.monotonic() - started:.1f} s",
    )
    c.close()
    b.terminate()


def pipelined(c: sl.Conn, messages: List[Dict[str, Any]], timeout: float = 30) -> List[Dict[str, Any]]:
    """Sends requests in one go (ids assigned here) and returns their replies in order."""
    first = c.next_id
    data = bytearray()
    for i, m in enumerate(messages):
        data += sl.encode({**m, "id": first + i})
    c.next_id += len(messages)
    sender = threading.Thread(target=c.sock.sendall, args=(bytes(data),))
    sender.start()
    replies = [c.reply_to(first + i, timeout) for i in range(len(messages))]
    sender.join()
    return replies


def limit_error(reply: Dict[str, Any], number: str) -> bool:
    return sl.error_code(reply) == "bad_request" and number in reply["error"]["message"]


def check_observer_handler_limits(checks: sl.Checks, ctx: Context) -> None:
    b = ctx.broker("per-connection")
    with sl.Conn(b.socket) as c, sl.Conn(b.socket) as other:
        c.hello()
        other.hello()
        replies = pipelined(c, [{"op": "subscribe", "events": [f"lim.{i}"]} for i in range(1024)])
        extra = c.request("subscribe", events=["lim.x"])
        checks.check(
            "1024 observers per connection; the next gets bad_request naming the limit",
            all("result" in r for r in replies) and limit_error(extra, "1024"),
            str(extra),
        )
        checks.check("another connection may still subscribe", "result" in other.request("subscribe", events=["lim.x"]))
        c.request("unsubscribe", observer=replies[0]["result"]["observer"])
        checks.check("after an unsubscribe the place is free again", "result" in c.request("subscribe", events=["y"]))
        replies = pipelined(c, [{"op": "handle", "channel": "lim", "method": f"m{i}"} for i in range(1024)])
        extra = c.request("handle", channel="lim", method="m-extra")
        checks.check(
            "1024 handlers per connection; the next gets bad_request naming the limit",
            all("result" in r for r in replies) and limit_error(extra, "1024"),
            str(extra),
        )
        data = b"".join(sl.encode({"op": "take", "id": f"t{i}", "slot": "never", "wait": 60000}) for i in range(1024))
        c.send_raw(data)  # these replies wait 60 s; the extra one is refused at once
        extra = c.request("take", slot="never", wait=60000)
        checks.check(
            "1024 waiting takes per connection; the next gets bad_request naming the limit",
            limit_error(extra, "1024"),
            str(extra),
        )
        names = [
            ("subscribe", {"events": ["n" * 257]}),
            ("subscribe", {"events": [f"e{i}" for i in range(65)]}),
            ("post", {"name": "n" * 257}),
            ("put", {"slot": "s" * 257, "value": 1}),
            ("take", {"slot": "s", "wait": 600001}),
            ("handle", {"channel": "c" * 257}),
        ]
        bad = [(op, sl.error_code(c.request(op, **fields))) for op, fields in names]
        checks.check(
            "names over 256 bytes, 65 events, a wait over 600000 ms: bad_request",
            all(code == "bad_request" for _op, code in bad),
            str(bad),
        )
        c.send({"op": "ping", "id": "i" * 257})
        long_id = c.recv()
        checks.check(
            "a string id over 256 bytes: bad_request with id null",
            sl.error_code(long_id) == "bad_request" and long_id["id"] is None,
            str(long_id)[:200],
        )
    b.terminate()


def check_calls_in_flight(checks: sl.Checks, ctx: Context) -> None:
    b = ctx.broker("calls", ["--call-timeout", "2m", "--max-output", str(64 << 20)])
    handler = sl.Conn(b.socket)
    handler.hello("silent-handler")
    handler.request("handle", channel="calls")
    with sl.Conn(b.socket, timeout=60) as c:
        c.hello()
        n = 65536
        data = bytearray()
        for i in range(n + 1):
            data += sl.encode({"op": "invoke", "id": i + 1, "channel": "calls", "method": "m"})
        sender = threading.Thread(target=c.sock.sendall, args=(bytes(data),))
        sender.start()
        extra = c.reply_to(n + 1, timeout=60)
        sender.join()
        checks.check(
            "65536 calls in flight per invoker; the next gets bad_request naming the limit",
            limit_error(extra, "65536"),
            str(extra),
        )
        handler.close()  # every pending call now ends with handler_gone
        gone = 0
        try:
            while gone < n:
                if sl.error_code(c.recv(30)) == "handler_gone":
                    gone += 1
        except (sl.Closed, sl.Timeout):
            pass
        checks.check("when the handler leaves, each of them gets handler_gone", gone == n, f"{gone} of {n}")
    b.terminate()


def check_call_stream(checks: sl.Checks, ctx: Context) -> None:
    """A long stream of invokes, each returned at once, within one call timeout: what the
    broker keeps of a call must go when the call returns, not when its timeout would end."""
    b = ctx.broker("call-stream", ["--call-timeout", "10m"])
    handler = sl.Conn(b.socket, timeout=30)
    handler.hello("echo-handler")
    handler.request("handle", channel="stream")
    stop = threading.Event()

    def serve() -> None:
        try:
            while not stop.is_set():
                frame = handler.recv(30)
                if frame.get("op") == "call":
                    handler.send({"op": "return", "call": frame["call"], "result": None})
        except (sl.Closed, sl.Timeout, OSError):
            pass

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    window = 256
    burst = b"".join(sl.encode({"op": "invoke", "id": i, "channel": "stream", "method": "m"}) for i in range(window))
    total, before, failed = 200_000, 0, 0
    with sl.Conn(b.socket, timeout=30) as c:
        c.hello()
        for n in range(total // window):
            if n == 20_000 // window:
                before = b.rss_kib()
            c.send_raw(burst)
            for _ in range(window):
                if "result" not in c.recv(30):
                    failed += 1
        after = b.rss_kib()
    stop.set()
    handler.close()
    growth = after - before
    line = f"{total} invokes returned at once, --call-timeout 10m: RSS {before} KiB after 20000, {after} KiB at the end"
    print(f"  {line}")
    checks.check("every invoke of the stream was answered with its result", failed == 0, f"{failed} failed")
    checks.check(
        "calls returned leave nothing behind: RSS grows by less than 1 MiB over 180000 more calls",
        growth < 1024,
        f"growth {growth} KiB",
    )
    b.terminate()


def check_queue(checks: sl.Checks, ctx: Context) -> None:
    # One poster here: its share of the queue (decision 41) is the whole queue.
    b = ctx.broker("queue", ["--max-queue", "3", "--max-queue-per-client", "3", "--hop-timeout", "30s"])
    stuck = sl.Conn(b.socket)
    stuck.hello("stuck-observer")
    stuck.request("subscribe", events=["q"])
    with sl.Conn(b.socket) as c:
        c.hello()
        for i in range(4):  # one runs (waiting on the stuck observer), three wait
            c.send({"op": "post", "id": 100 + i, "name": "q"})
        time.sleep(0.3)
        full = c.request("post", name="q", timeout=3)
        with sl.Conn(b.socket) as s:
            s.hello()
            pending = s.request("status")["result"]["queue"]["pending"]
        # At once: refused while the running post still waits on the stuck observer, before
        # any of the queued posts was answered.
        early = [f for f in c.unsolicited if f.get("id") in range(100, 104)]
        checks.check(
            "--max-queue 3: a fourth waiting post gets queue_full at once",
            sl.error_code(full) == "queue_full" and pending == 3 and not early,
            f"{full.get('error')}, {pending} pending, {len(early)} queued post(s) answered before it",
        )
        stuck.close()
        outcomes = [c.reply_to(100 + i, timeout=10)["result"]["outcome"] for i in range(4)]
        checks.check("the queued posts still run once the chain is free", outcomes == ["unhandled"] * 4, str(outcomes))
    b.terminate()
    b = ctx.broker("queue0", ["--max-queue", "0", "--hop-timeout", "30s"])
    stuck = sl.Conn(b.socket)
    stuck.hello()
    stuck.request("subscribe", events=["q"])
    with sl.Conn(b.socket) as c:
        c.hello()
        c.send({"op": "post", "id": 1, "name": "q"})
        time.sleep(0.2)
        checks.check(
            "--max-queue 0: a post while one runs gets queue_full",
            sl.error_code(c.request("post", name="q", timeout=3)) == "queue_full",
        )
    stuck.close()
    b.terminate()


def check_queue_bytes(checks: sl.Checks, ctx: Context) -> None:
    """Posts waiting behind a stalled chain hold their payloads. --max-queue counts posts,
    not bytes, so one client can park max-queue x max-frame (about 10 GiB by default)."""
    b = ctx.broker("queue-bytes", ["--hop-timeout", "1m"])
    base = b.rss_kib()
    stuck = sl.Conn(b.socket)
    stuck.hello("stuck-observer")
    stuck.request("subscribe", events=["q"])
    posts = 400
    with sl.Conn(b.socket, timeout=60) as c:
        c.hello("parker")
        frame = sl.encode({"op": "post", "id": 0, "name": "q", "payload": "p" * 1_000_000})
        sender = threading.Thread(target=lambda: [c.sock.sendall(frame) for _ in range(posts)])
        sender.start()
        sender.join(60)
        c.send({"op": "ping", "id": "last"})
        refused = 0
        try:
            while True:
                reply = c.recv(30)
                if reply.get("id") == "last":
                    break
                refused += sl.error_code(reply) == "queue_full"
        except (sl.Closed, sl.Timeout):
            pass
        peak = b.hwm_kib()
    # 256 MiB: four times the slot budget, sixteen times the output bound of a connection.
    bound = base + 256 * 1024
    checks.check(
        "one client cannot park unbounded payload bytes in the queue",
        peak <= bound,
        f"{posts} posts of 1 MB behind a stalled observer: {refused} refused, "
        f"peak RSS {sl.mib(peak)} (bound {sl.mib(bound)}); --max-queue counts posts, not bytes",
    )
    stuck.close()
    b.kill()


def check_slots(checks: sl.Checks, ctx: Context) -> None:
    b = ctx.broker("slots")
    with sl.Conn(b.socket, timeout=30) as c:
        c.hello()
        replies = pipelined(c, [{"op": "put", "slot": f"s{i}", "value": i} for i in range(4096)])
        extra = c.request("put", slot="s-extra", value=1)
        replace = c.request("put", slot="s0", value="again")
        c.request("put", slot="s1", value=None)
        freed = c.request("put", slot="s-extra", value=1)
        checks.check(
            "4096 slots; the next gets bad_request naming the limit",
            all("result" in r for r in replies) and limit_error(extra, "4096"),
            str(extra),
        )
        checks.check(
            "at the slot limit, replacing works and emptying frees a place",
            "result" in replace and "result" in freed,
            f"{replace}, {freed}",
        )
    b.terminate()

    b = ctx.broker("slot-bytes")
    with sl.Conn(b.socket, timeout=30) as c:
        c.hello()
        value = "x" * (1_000_000 - 2)  # 1,000,000 bytes of JSON
        fits = (64 << 20) // 1_000_000
        replies = [c.request("put", slot=f"b{i}", value=value) for i in range(fits)]
        extra = c.request("put", slot="b-extra", value=value)
        checks.check(
            f"64 MiB of slot values ({fits} x 1 MB fit); the next gets bad_request naming the limit",
            all("result" in r for r in replies) and limit_error(extra, str(64 << 20)),
            str(extra)[:200],
        )
        payload = {
            "actionIdentifier": "com.apple.UNNotificationDefaultActionIdentifier",
            "notification": {"identifier": "n1", "content": {"title": "t"}},
        }
        post = c.request("post", name="didReceive", payload=payload)
        launch = c.request("peek", slot="launch")
        checks.check(
            "launch retention still stores when the quota is full (decision 20)",
            post.get("result", {}).get("retained") == "launch" and launch.get("result") == payload,
            str(post)[:200],
        )
        c.request("take", slot="b0")
        checks.check("taking a value frees its bytes", "result" in c.request("put", slot="b-extra", value=value))
    rss = b.rss_kib()
    b.terminate()
    checks.check("slot values are held once (RSS with 64 MiB of values)", rss < 3 * 64 * 1024, sl.mib(rss))


def check_frame_size(checks: sl.Checks, ctx: Context) -> None:
    b = ctx.broker("frame", ["--max-frame", "1000"])
    with sl.Conn(b.socket) as c:
        hello = c.hello()
        checks.check("hello reports --max-frame", hello["result"]["maxFrame"] == 1000, str(hello))
        body = b'{"op":"ping","id":1}'
        c.send_raw(sl.raw_frame(body + b" " * (1000 - len(body))))
        checks.check("a frame of exactly --max-frame bytes is read", "result" in c.recv())
        c.send_raw(struct.pack(">I", 1001))  # the header alone: decided without the body
        frame = c.recv(3)
        checks.check(
            "a length of --max-frame + 1 gets frame_too_large from the header alone, then close",
            sl.error_code(frame) == "frame_too_large" and frame["id"] is None and c.expect_eof(),
            str(frame),
        )
    with sl.Conn(b.socket) as c:
        c.send_raw(b"\0\0\0\0")
        frame = c.recv(3)
        checks.check(
            "a length of 0 gets frame_too_large, then close",
            sl.error_code(frame) == "frame_too_large" and c.expect_eof(),
            str(frame),
        )
    b.terminate()
    b = ctx.broker("deep")
    with sl.Conn(b.socket) as c:
        c.hello()
        depth = 400_000
        deep = b"[" * depth + b"]" * depth
        answers = []
        for name, wrap in (
            ("deep.plain", b"%s"),
            ("willPresent", b'{"notification":{"identifier":"n","content":{"userInfo":{"d":%s}}}}'),
        ):
            c.send_raw(
                sl.raw_frame(b'{"op":"post","id":1,"name":"' + name.encode() + b'","payload":' + wrap % deep + b"}")
            )
            answers.append(c.recv(10))
        pong = "result" in c.request("ping")
        checks.check(
            "400,000 levels of nesting: no crash, an answer each, still serving",
            b.alive() and pong and len(answers) == 2,
            f"{[a.get('result', {}).get('outcome') or sl.error_code(a) for a in answers]}",
        )
    b.terminate()
    b = ctx.broker("frame-default")
    with sl.Conn(b.socket) as c:
        c.hello()
        head = b'{"op":"put","id":2,"slot":"edge","value":"'
        value = b"v" * ((1 << 20) - len(head) - 2)
        c.send_raw(sl.raw_frame(head + value + b'"}'))
        ok = "result" in c.recv(10)
        c.send_raw(struct.pack(">I", (1 << 20) + 1))
        frame = c.recv(3)
        checks.check(
            "default --max-frame is 1 MiB: 1048576 read, 1048577 refused",
            ok and sl.error_code(frame) == "frame_too_large",
            str(frame),
        )
    b.terminate()


def check_shutdown(checks: sl.Checks, ctx: Context) -> None:
    """SIGTERM while a peer does not read and requests are pending everywhere."""
    b = ctx.broker("shutdown", ["--hop-timeout", "1m", "--call-timeout", "1m"])
    watcher = sl.Conn(b.socket)
    watcher.hello("never-reads")
    watcher.send({"op": "monitor", "id": 2})
    stuck = sl.Conn(b.socket)
    stuck.hello("stuck")
    stuck.request("subscribe", events=["s"])
    stuck.request("handle", channel="s")
    with sl.Conn(b.socket) as c:
        c.hello()
        c.request("put", slot="fill", value="w" * 400_000)
        for _ in range(30):  # about 12 MB queued for the watcher, under its 16 MiB bound
            c.request("peek", slot="fill")
        c.send({"op": "post", "id": "p1", "name": "s"})
        c.send({"op": "post", "id": "p2", "name": "s"})
        c.send({"op": "invoke", "id": "i1", "channel": "s", "method": "m"})
        c.send({"op": "take", "id": "t1", "slot": "empty", "wait": 60000})
        c.request("ping")
        started = time.monotonic()
        b.process.send_signal(15)
        codes = {}
        try:
            for _ in range(4):
                frame = c.recv(3)
                codes[frame.get("id")] = sl.error_code(frame)
        except (sl.Closed, sl.Timeout):
            pass
        rc = b.wait_exit(5)
        took = time.monotonic() - started
    checks.check(
        "SIGTERM: queued and running posts, pending invokes, waiting takes get shutting_down",
        codes == {k: "shutting_down" for k in ("p1", "p2", "i1", "t1")},
        str(codes),
    )
    # The broker stopped waiting for the peer that does not read, by that connection's flush
    # timeout or by the shutdown deadline (the contract's 2 s less a margin), says so, and
    # exits 0. How long it took is a figure.
    log = b.log()
    gave_up = "took no output for" in log or "did not take their output in time" in log
    checks.check(
        "SIGTERM: exits 0, giving up on a peer that does not read",
        rc == 0 and gave_up,
        f"exit {rc} after {took:.2f} s; giving up logged: {gave_up}",
    )
    checks.check("SIGTERM: the socket file is removed", not os.path.exists(b.socket))
    watcher.close()
    stuck.close()


CHECKS = [
    ("socket-mode", check_socket_mode),
    ("forbidden", check_forbidden),
    ("default-folder", check_default_folder),
    ("socket-folders", check_socket_folders),
    ("state-dir", check_state_dir),
    ("flood-seen", flood_seen),
    ("flood-events", flood_events),
    ("flood-replies", flood_replies),
    ("per-connection", check_observer_handler_limits),
    ("calls", check_calls_in_flight),
    ("call-stream", check_call_stream),
    ("queue", check_queue),
    ("queue-bytes", check_queue_bytes),
    ("slots", check_slots),
    ("frame", check_frame_size),
    ("shutdown", check_shutdown),
]


def main() -> int:
    return sl.run_checks("security", __doc__, "nb-sec-", CHECKS, Context)


if __name__ == "__main__":
    sys.exit(main())
