"""The servers' side of notifbus over NATS (Protocol/NATS.md): post, put and invoke on a device
through its `notifbus bridge nats`, and read what the device sends back. What `notifbus push`
does from a shell, for asyncio programs. Needs nats-py; the device's own client
(Clients/python, package `notifbus`) stays standard library only.

    nc = await nats.connect(servers=["nats://n1:4222"])
    laptop = Device(nc, "laptop")              # layout="shared" for bridges run with --layout shared
    result = await laptop.post("willPresent", {"notification": {...}}, wait=True)
    await laptop.put("launch", {"emailId": "e-42"}, wait=True)
    archived = await laptop.invoke("mail.actions", "archive", {"id": "e-42"})
    clicks = await laptop.events("didReceive")
    click = await clicks.next(timeout=30)
"""

from __future__ import annotations

import asyncio
import datetime
import json
import re
import secrets
import time
from typing import Any, Optional

import nats.errors
from nats.js.api import ConsumerConfig, DeliverPolicy
from nats.js.errors import NotFoundError

__all__ = ["Device", "DeadLetter", "Events", "PushError", "RemoteError"]

_DEVICE = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The broker's bound on names and idempotency keys, in bytes (protocol-v1).
_MAX_NAME = 256
_MAX_KEY = 256
#: The stream layouts of NATS.md §2: what comes between `notifbus.<device>.` and `post`/`put`.
_LAYOUTS = {"per-device": "", "shared": "in."}


class PushError(Exception):
    """A push that failed: NATS refused or did not answer in time, or the device did not."""


class DeadLetter(PushError):
    """The device's bridge refused the message to `notifbus.<device>.dead` (NATS.md §5)."""

    def __init__(self, msg_id: str, reason: str, detail: str) -> None:
        super().__init__(f"the device refused {msg_id} (dead letter): {reason}: {detail}")
        self.msg_id = msg_id
        self.reason = reason
        self.detail = detail


class RemoteError(PushError):
    """An `{"error": {...}}` from the device: an invoke's handler or the bridge refused the
    call, or a post's chain was cut (`interrupted`)."""

    def __init__(self, code: str, message: str, details: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.details = details


def _check_name(name: str, what: str, *, one_token: bool = False) -> None:
    """A name becomes the tail of a subject: 1-256 bytes of dot-joined tokens, none empty,
    without spaces, control characters or wildcards."""
    size = len(name.encode())
    if not 1 <= size <= _MAX_NAME:
        raise ValueError(f"{what} needs 1 to {_MAX_NAME} bytes")
    if any(ord(c) <= 0x20 or ord(c) == 0x7F or c in "*>" for c in name) or "" in name.split("."):
        raise ValueError(
            f"{what} {name!r} is not a subject tail: tokens joined by '.', none empty, no spaces or wildcards"
        )
    if one_token and "." in name:
        raise ValueError(f"{what} {name!r} is one subject token: it cannot hold a dot")


def _body(value: Any) -> bytes:
    """JSON text of `value`; bytes are taken as JSON text already and checked."""
    if isinstance(value, (bytes, bytearray)):
        try:
            json.loads(value)
        except ValueError as error:
            raise ValueError(f"the body is not one JSON value: {error}") from None
        return bytes(value)
    return json.dumps(value, separators=(",", ":")).encode()


class Events:
    """Exported events of one name (`--export EVENT` on the device), from when this was made."""

    def __init__(self, subscription) -> None:
        self._sub = subscription

    async def next(self, timeout: float = 30) -> Any:
        """The next event's payload (parsed JSON; None when it had none); acks it."""
        try:
            msgs = await self._sub.fetch(1, timeout=timeout)
        except asyncio.TimeoutError:
            raise PushError(f"no event within {timeout} s") from None
        await msgs[0].ack()
        return json.loads(msgs[0].data) if msgs[0].data else None

    async def close(self) -> None:
        await self._sub.unsubscribe()


class Device:
    """One device, reached through its bridge over the NATS connection `nc` (nats-py).

    `layout` is the one the device's bridge runs (`--layout`, NATS.md §2): "per-device" (the
    default) publishes posts and puts to `notifbus.<device>.post.<event>` and `.put.<slot>`,
    "shared" to `notifbus.<device>.in.post.<event>` and `.in.put.<slot>`. Every other subject
    is the same in both."""

    def __init__(self, nc, device: str, *, timeout: float = 30, layout: str = "per-device") -> None:
        if not _DEVICE.fullmatch(device):
            raise ValueError(f"device {device!r} needs 1-64 of A-Z a-z 0-9 - _ (it is one subject token)")
        if layout not in _LAYOUTS:
            raise ValueError(f"layout {layout!r} is not one of {', '.join(_LAYOUTS)}")
        self.nc = nc
        self.js = nc.jetstream(timeout=timeout)
        self.device = device
        self.timeout = timeout
        self.layout = layout
        self.prefix = f"notifbus.{device}."
        #: What comes before `post.<event>` and `put.<slot>`.
        self.inbound_prefix = self.prefix + _LAYOUTS[layout]
        #: The longest Nats-Msg-Id whose key `nats/<device>/<id>` fits the broker's 256 bytes.
        self.max_msg_id = _MAX_KEY - len(f"nats/{device}/")

    def _msg_id(self, msg_id: Optional[str]) -> str:
        if msg_id is None:
            return "push-" + secrets.token_hex(8)
        if not 1 <= len(msg_id.encode()) <= self.max_msg_id:
            raise ValueError(f"msg_id needs 1 to {self.max_msg_id} bytes for device {self.device}")
        return msg_id

    async def _publish(self, subject: str, body: bytes, msg_id: str):
        try:
            return await self.js.publish(subject, body, timeout=self.timeout, headers={"Nats-Msg-Id": msg_id})
        except Exception as error:
            raise PushError(f"publishing {subject} failed: {type(error).__name__} {error}") from None

    async def _watch(self, subject: str, msg_id: str, found: asyncio.Future):
        def offer(msg) -> None:
            if not found.done() and (msg.headers or {}).get("Notifbus-Msg-Id") == msg_id:
                found.set_result(msg)

        async def callback(msg) -> None:
            offer(msg)

        return await self.nc.subscribe(subject, cb=callback)

    async def post(
        self,
        event: str,
        payload: Any = None,
        *,
        msg_id: Optional[str] = None,
        wait: bool = False,
        body: Optional[bytes] = None,
    ) -> dict:
        """Posts `event` with `payload` (JSON; `body` gives the JSON text as it is). Without
        `wait`: {"msgId", "stream", "seq"} once JetStream stored it. With `wait`: the broker's
        post result once the device ran the chain (raises DeadLetter, RemoteError for
        `interrupted`, PushError on timeout)."""
        _check_name(event, "event")
        data = body if body is not None else (b"" if payload is None else _body(payload))
        return await self._send("post", event, data, self._msg_id(msg_id), wait)

    async def put(
        self, slot: str, value: Any, *, msg_id: Optional[str] = None, wait: bool = False, consumer: Optional[str] = None
    ) -> dict:
        """Puts `value` (JSON) into `slot` on the device. With `wait`, returns once the device's
        bridge has applied and acked it (reads the ack floor of `consumer`, by default
        `notifbus-bridge-<device>`)."""
        _check_name(slot, "slot")
        return await self._send("put", slot, _body(value), self._msg_id(msg_id), wait, consumer)

    async def _send(
        self, kind: str, name: str, data: bytes, msg_id: str, wait: bool, consumer: Optional[str] = None
    ) -> dict:
        found: asyncio.Future = asyncio.get_running_loop().create_future()
        subs = []
        try:
            if wait:
                if kind == "post":
                    subs.append(await self._watch(self.prefix + "result", msg_id, found))
                subs.append(await self._watch(self.prefix + "dead", msg_id, found))
                await self.nc.flush(timeout=self.timeout)
            deadline = time.monotonic() + self.timeout
            ack = await self._publish(f"{self.inbound_prefix}{kind}.{name}", data, msg_id)
            stored = {"msgId": msg_id, "stream": ack.stream, "seq": ack.seq}
            if ack.duplicate:
                stored["duplicate"] = True
            if not wait:
                return stored
            if kind == "post":
                if ack.duplicate:
                    earlier = await self._earlier(ack.stream, ack.seq, msg_id, deadline)
                    if earlier is not None:
                        return self._outcome(earlier, msg_id)
                try:
                    msg = await asyncio.wait_for(found, max(0.0, deadline - time.monotonic()))
                except asyncio.TimeoutError:
                    raise PushError(
                        f"no result from device {self.device} for {msg_id} in time; "
                        "the post stays in the stream until the device's bridge takes it"
                    ) from None
                return self._outcome(msg, msg_id)
            durable = consumer or f"notifbus-bridge-{self.device}"
            while time.monotonic() < deadline:
                if found.done():
                    return self._outcome(found.result(), msg_id)
                info = await self.js.consumer_info(ack.stream, durable)
                if info.ack_floor.stream_seq >= ack.seq:
                    # The bridge publishes a dead letter before it acks.
                    await self.nc.flush(timeout=self.timeout)
                    if found.done():
                        return self._outcome(found.result(), msg_id)
                    return {**stored, "applied": True}
                await asyncio.sleep(0.05)
            raise PushError(
                f"device {self.device} has not applied put {msg_id} in time; "
                f"it stays in stream {ack.stream} (seq {ack.seq}) until the device's bridge takes it"
            )
        finally:
            for sub in subs:
                await sub.unsubscribe()

    async def _earlier(self, stream: str, seq: int, msg_id: str, deadline: float):
        """The result or dead letter of a post the stream already held (its id sent before),
        read from the streams of the result and dead-letter subjects from a few seconds before
        the first copy was stored (as `notifbus push` does), or None. When the inbound stream no
        longer holds the first copy (the shared layout's work queue removes what the bridge
        acked), that copy was stored within the stream's duplicate window, which sets the start
        instead, a minute earlier for this machine's clock against the server's."""
        try:
            stored = await self.js.get_msg(stream, seq)
            since = stored.time - datetime.timedelta(seconds=5)
        except NotFoundError:
            info = await self.js.stream_info(stream)
            window = datetime.timedelta(seconds=info.config.duplicate_window or 0)
            since = datetime.datetime.now(datetime.timezone.utc) - window - datetime.timedelta(minutes=1)
        for subject in (self.prefix + "result", self.prefix + "dead"):
            config = ConsumerConfig(deliver_policy=DeliverPolicy.BY_START_TIME, opt_start_time=since)
            sub = await self.js.subscribe(subject, ordered_consumer=True, config=config)
            try:
                info = await sub.consumer_info()
                left = info.delivered.consumer_seq + info.num_pending
                while left > 0 and time.monotonic() < deadline:
                    msg = await sub.next_msg(timeout=max(0.001, deadline - time.monotonic()))
                    if (msg.headers or {}).get("Notifbus-Msg-Id") == msg_id:
                        return msg
                    left -= 1
            except (asyncio.TimeoutError, nats.errors.TimeoutError):
                return None
            finally:
                await sub.unsubscribe()
        return None

    @staticmethod
    def _outcome(msg, msg_id: str) -> dict:
        headers = msg.headers or {}
        if "Notifbus-Reason" in headers:
            raise DeadLetter(msg_id, headers["Notifbus-Reason"], headers.get("Notifbus-Detail", ""))
        message = json.loads(msg.data)
        error = message.get("error")
        if error is not None:
            raise RemoteError(error.get("code", "?"), error.get("message", ""), error.get("details"))
        return message["result"]

    async def invoke(self, channel: str, method: str, arguments: Any = None, *, timeout: Optional[float] = None) -> Any:
        """Calls `method` on `channel` on the device and returns the handler's result;
        raises RemoteError with the handler's (or the bridge's) error."""
        _check_name(channel, "channel")
        _check_name(method, "method", one_token=True)
        bound = timeout if timeout is not None else self.timeout
        data = b"" if arguments is None else _body(arguments)
        subject = f"{self.prefix}invoke.{channel}.{method}"
        try:
            reply = await self.nc.request(
                subject, data, timeout=bound, headers={"Notifbus-Timeout-Ms": str(max(1, int(bound * 1000)))}
            )
        except Exception as error:
            raise PushError(
                f"no reply from device {self.device} to {subject} within {bound} s "
                f"(is its bridge running?): {type(error).__name__}"
            ) from None
        message = json.loads(reply.data)
        error = message.get("error")
        if error is not None:
            raise RemoteError(error.get("code", "?"), error.get("message", ""), error.get("details"))
        return message.get("result")

    async def events(self, event: str) -> Events:
        """The device's exported `event`s (`notifbus.<device>.event.<event>`) published from now on."""
        _check_name(event, "event")
        subject = f"{self.prefix}event.{event}"
        sub = await self.js.pull_subscribe(subject, config=ConsumerConfig(deliver_policy=DeliverPolicy.NEW))
        return Events(sub)
