"""Frame encoding and decoding for protocol v1: a 4-byte big-endian length, then a
UTF-8 JSON object.

Bytes in, frames out: no sockets here. Incoming frames are not held to ``maxFrame``,
since the broker may legitimately write longer ones (``seen``, ``status``).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

from . import _deep_json
from ._errors import ProtocolViolation

#: Size of the length prefix in bytes.
HEADER_SIZE = 4

#: The length prefix is a 32-bit unsigned integer.
MAX_LENGTH = 0xFFFFFFFF


def encode_frame(message: Mapping[str, Any]) -> bytes:
    """Serialize one message to a frame.

    Raises ``TypeError`` for values JSON cannot hold and ``ValueError`` for NaN and
    infinities, which JSON does not have.
    """
    text = _dumps(message, ensure_ascii=False)
    try:
        body = text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (valid in JSON as an escape, as received) has no UTF-8 form:
        # write every non-ASCII character as an escape instead.
        body = _dumps(message, ensure_ascii=True).encode("ascii")
    if len(body) > MAX_LENGTH:
        raise ValueError(f"frame body of {len(body)} bytes does not fit a 32-bit length")
    return len(body).to_bytes(HEADER_SIZE, "big") + body


def _dumps(message: Mapping[str, Any], ensure_ascii: bool) -> str:
    """``json.dumps``, or for a value nested deeper than it goes, the same text written
    without recursion."""
    try:
        return json.dumps(message, separators=(",", ":"), ensure_ascii=ensure_ascii, allow_nan=False)
    except RecursionError:
        return _deep_json.dumps(message, ensure_ascii=ensure_ascii)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def decode_body(body: bytes) -> Dict[str, Any]:
    """Parse a frame body; it must be UTF-8 JSON whose top-level value is an object.

    Stricter than ``json.loads``: ``NaN`` and ``Infinity`` are not JSON. User data nested
    deeper than ``json.loads`` goes (about a thousand levels; the broker forwards any depth
    that fits ``maxFrame``) is read without recursion.
    """
    try:
        text = body.decode("utf-8")
        try:
            value = json.loads(text, parse_constant=_reject_constant)
        except RecursionError:
            value = _deep_json.loads(text)
    except (UnicodeDecodeError, ValueError) as exc:
        raise ProtocolViolation(f"frame is not valid UTF-8 JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ProtocolViolation(f"frame is a JSON {type(value).__name__}, not an object")
    return value


class FrameDecoder:
    """Reassembles frames from a byte stream cut at arbitrary points.

    ``feed`` appends bytes; ``next_frame`` returns the next complete frame, or
    ``None`` until more bytes arrive. After a ``ProtocolViolation`` the stream is out of
    step and the decoder must not be used further.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._offset = 0

    def feed(self, data: bytes) -> None:
        """Append bytes read from the stream."""
        if self._offset:
            del self._buffer[: self._offset]
            self._offset = 0
        self._buffer += data

    def next_frame(self) -> Optional[Dict[str, Any]]:
        """Decode and return the next complete frame, or ``None`` if none is complete."""
        available = len(self._buffer) - self._offset
        if available < HEADER_SIZE:
            return None
        start = self._offset
        length = int.from_bytes(self._buffer[start : start + HEADER_SIZE], "big")
        if length == 0:
            raise ProtocolViolation("frame of length 0")
        if available < HEADER_SIZE + length:
            return None
        body = bytes(self._buffer[start + HEADER_SIZE : start + HEADER_SIZE + length])
        self._offset = start + HEADER_SIZE + length
        return decode_body(body)

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as a frame."""
        return len(self._buffer) - self._offset
