"""The servers' side against a real 3-node cluster, a broker and its bridge: `notifbus push`
(post, put, invoke, with and without --wait, a message id sent twice, bad input, a missing
bridge executable) and the same through notifbus_server (Clients/python-server). It asserts
effects and outputs, never times. scripts/test.d/56-nats.sh starts the cluster.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import threading

import nats
from notifbus_server import Device as ServerDevice
from notifbus_server import RemoteError

import notifbus

from natslib import FAILURES, Process, bin_urls_work_args, check, wait_until

DEVICE = "pushdev"


class Apps:
    """The device's local apps: an observer of `mail` that answers with the payload's `n`, and
    the `mail.actions` handlers."""

    def __init__(self, socket: str) -> None:
        self.bus = notifbus.connect(socket=socket, name="push-test-device")
        self.lock = threading.Lock()
        self.seen: list = []
        self.bus.add_observer("mail", self.on_mail, priority=10)
        channel = self.bus.method_channel("mail.actions")
        channel.set_method_call_handler(lambda method, arguments: {"archived": arguments["id"]}, "archive")
        channel.set_method_call_handler(self.refuse, "refuse")

    def on_mail(self, event):
        n = event.payload.get("n") if isinstance(event.payload, dict) else None
        with self.lock:
            self.seen.append(n)
        return notifbus.Complete({"shown": n})

    @staticmethod
    def refuse(method, arguments):
        raise notifbus.MethodCallError("denied", "not your mailbox", {"owner": "bob"})

    def count(self, n) -> int:
        with self.lock:
            return self.seen.count(n)


class Push:
    """Runs `notifbus push` with the cluster's URLs and the device."""

    def __init__(self, notifbus_path: str, urls: str) -> None:
        self.notifbus = notifbus_path
        self.urls = urls

    def run(self, *words: str, device: str = DEVICE, stdin: bytes = b"", binary: str = "") -> tuple:
        command = [binary or self.notifbus, "push", "--nats", self.urls, "--device", device, "--timeout", "30s", *words]
        done = subprocess.run(command, input=stdin, capture_output=True, timeout=60)
        return done.returncode, done.stdout.decode(), done.stderr.decode()

    def json(self, *words: str) -> tuple:
        status, out, err = self.run(*words)
        try:
            return status, json.loads(out), err
        except ValueError:
            return status, None, err + out


async def cli(push: Push, apps: Apps, bus, work: str, notifbus_path: str) -> None:
    status, out, err = push.json("--msg-id", "cli-1", "--wait", "post", "mail", '{"n":1}')
    check(
        status == 0 and out is not None and out.get("msgId") == "cli-1",
        f"push post --wait prints the result message ({status} {out} {err})",
    )
    result = (out or {}).get("result", {})
    check(
        result.get("outcome") == "completed" and result.get("value") == {"shown": 1},
        f"the result is the device's chain: completed with the observer's value ({result})",
    )
    check(apps.count(1) == 1, "the device ran the post once")

    status, out, err = push.json("--msg-id", "cli-1", "post", "mail", '{"n":1}')
    check(
        status == 0 and out is not None and out.get("duplicate") is True,
        f"the same --msg-id again: stored once, the output says duplicate ({out} {err})",
    )
    status, again, err = push.json("--msg-id", "cli-1", "--wait", "post", "mail", '{"n":1}')
    check(
        status == 0 and again is not None and again.get("result") == result,
        f"the same --msg-id again with --wait: the first result, read from the result stream ({again} {err})",
    )
    status, out, err = push.json("post", "mail", '{"n":2}')
    check(
        status == 0
        and out is not None
        and out.get("msgId", "").startswith("push-")
        and out.get("stream") == f"NOTIFBUS_{DEVICE}"
        and isinstance(out.get("seq"), int),
        f"push post without --wait prints msgId, stream and seq ({out} {err})",
    )
    check(await wait_until(lambda: apps.count(2) == 1, 30), "a post without --wait runs on the device too")
    await asyncio.sleep(1)
    check(apps.count(1) == 1, "the message sent twice with one id ran once")

    body = os.path.join(work, "value.json")
    with open(body, "w") as f:
        f.write('{"emailId": "e-42", "n": 1.50}')
    status, out, err = push.json("--wait", "put", "launch", "@" + body)
    check(
        status == 0 and out is not None and out.get("applied") is True,
        f"push put --wait returns once applied ({out} {err})",
    )
    check(bus.peek("launch") == {"emailId": "e-42", "n": 1.50}, "the put's value is in the device's slot")
    status, out, err = push.run("--wait", "put", "launch2", "-", stdin=b'"from stdin"')
    check(status == 0 and bus.peek("launch2") == "from stdin", f"put reads JSON from standard input with - ({err})")

    status, out, err = push.json("invoke", "mail.actions", "archive", '{"id":"e-1"}')
    check(
        status == 0 and out == {"result": {"archived": "e-1"}}, f"push invoke prints the handler's result ({out} {err})"
    )
    status, out, err = push.json("invoke", "mail.actions", "refuse", "{}")
    check(
        status == 1 and (out or {}).get("error", {}).get("code") == "denied",
        f"push invoke of a refusing handler prints its error and exits 1 ({status} {out})",
    )

    # Bad input: a usage error (status 2) that names the mistake, and nothing published.
    for words, device, says in [
        (["post", "mail", "{}"], "dev.1", "--device"),
        (["post", "mail", "{}"], "dev 1", "--device"),
        (["post", "mail box", "{}"], DEVICE, "not a subject tail"),
        (["post", "mail.*", "{}"], DEVICE, "not a subject tail"),
        (["post", "mail..x", "{}"], DEVICE, "not a subject tail"),
        (["put", "launch", "{bad"], DEVICE, "not JSON"),
        (["put", "launch"], DEVICE, "expected put SLOT JSON"),
        (["invoke", "mail", "a.b", "{}"], DEVICE, "cannot hold a dot"),
        (["post", "mail", "@" + os.path.join(work, "missing.json")], DEVICE, "cannot read"),
        (["send", "mail"], DEVICE, "unknown action"),
    ]:
        status, out, err = push.run(*words, device=device)
        check(
            status == 2 and says in err and out == "",
            f"bad input {words} on {device!r}: status 2, says {says!r} ({status} {err.strip()})",
        )

    status, out, err = Push(notifbus_path, "nats://127.0.0.1:1").run("post", "mail", "{}")
    check(status == 1 and "cannot reach NATS" in err, f"NATS not reachable: a clear error ({status} {err.strip()})")
    status, out, err = push.run("invoke", "mail.actions", "archive", "{}", device="nobody")
    check(status == 1 and "no reply from device nobody" in err, f"invoke of a device without a bridge ({err.strip()})")
    status, out, err = push.run("post", "mail", "{}", device="nobody")
    check(status == 1 and "no JetStream stream takes" in err, f"post to a device without a stream ({err.strip()})")

    # `notifbus push` runs notifbus-bridge from its own folder: without it, one line says so.
    alone = os.path.join(work, "alone")
    os.makedirs(alone, exist_ok=True)
    shutil.copy(notifbus_path, os.path.join(alone, "notifbus"))
    status, out, err = push.run("post", "mail", "{}", binary=os.path.join(alone, "notifbus"))
    check(
        status == 1 and "notifbus-bridge is not installed" in err,
        f"no bridge executable: a clear error ({status} {err.strip()})",
    )


async def library(urls: str, apps: Apps, bus) -> None:
    nc = await nats.connect(servers=urls.split(","))
    device = ServerDevice(nc, DEVICE, timeout=30)
    clicks = await device.events("didReceive")
    result = await device.post("mail", {"n": 10}, msg_id="lib-10", wait=True)
    check(
        result.get("outcome") == "completed" and result.get("value") == {"shown": 10},
        f"notifbus_server post(wait=True) ({result})",
    )
    stored = await device.post("mail", {"n": 10}, msg_id="lib-10")
    check(stored.get("duplicate") is True, f"notifbus_server: the same msg_id is stored once ({stored})")
    again = await device.post("mail", {"n": 10}, msg_id="lib-10", wait=True)
    check(again == result, f"notifbus_server: the same msg_id with wait=True gives the first result ({again})")
    applied = await device.put("launch", {"from": "python"}, wait=True)
    check(
        applied.get("applied") is True and bus.peek("launch") == {"from": "python"},
        f"notifbus_server put(wait=True) ({applied})",
    )
    check(
        await device.invoke("mail.actions", "archive", {"id": "e-2"}) == {"archived": "e-2"}, "notifbus_server invoke"
    )
    try:
        await device.invoke("mail.actions", "refuse", {})
        check(False, "notifbus_server invoke of a refusing handler raises")
    except RemoteError as error:
        check(
            error.code == "denied" and error.details == {"owner": "bob"},
            f"notifbus_server RemoteError carries code and details ({error})",
        )
    for bad in (lambda: ServerDevice(nc, "a.b"), lambda: device.post("a b", {}), lambda: device.put("slot", b"{bad")):
        try:
            made = bad()
            if asyncio.iscoroutine(made):
                await made
            check(False, "notifbus_server refuses bad input")
        except ValueError as error:
            check(True, f"notifbus_server refuses bad input: {error}")
    sent = {
        "actionIdentifier": "com.apple.UNNotificationDefaultActionIdentifier",
        "notification": {"identifier": "mail-42", "content": {"title": "New mail"}},
    }
    bus.post("didReceive", sent)
    click = await clicks.next(timeout=30)
    check(click == sent, f"notifbus_server events() reads an exported event ({click})")
    await clicks.close()
    await nc.close()
    check(apps.count(10) == 1, "the library's post ran once on the device")


async def main() -> int:
    args = bin_urls_work_args()
    os.makedirs(args.work, exist_ok=True)
    notifbus_path = os.path.join(args.bin, "notifbus")
    socket = os.path.join(args.work, "bus.sock")
    broker = Process(
        [notifbus_path, "broker", "--socket", socket, "--state-dir", os.path.join(args.work, "state")],
        os.path.join(args.work, "broker.log"),
    )
    bridge = Process(
        [
            notifbus_path,
            "bridge",
            "nats",
            "--url",
            args.urls,
            "--device",
            DEVICE,
            "--socket",
            socket,
            "--create-stream",
            "--replicas",
            "3",
            "--export",
            "didReceive",
        ],
        os.path.join(args.work, "bridge.log"),
    )
    broker.start()
    try:
        await wait_until(lambda: os.path.exists(socket), 10)
        apps = Apps(socket)
        bridge.start()
        check(await wait_until(lambda: "bridging device" in bridge.log_text(), 60), "the bridge started")
        await cli(Push(notifbus_path, args.urls), apps, apps.bus, args.work, notifbus_path)
        await library(args.urls, apps, apps.bus)
    finally:
        bridge.stop()
        broker.stop()
    if FAILURES:
        print(f"push_test: {len(FAILURES)} failed:", *FAILURES, sep="\n  ")
        print(bridge.log_text()[-3000:])
        return 1
    print("push_test: ok")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
