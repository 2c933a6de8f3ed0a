"""Frame encoding and decoding (with the shared vectors), socket path resolution and
the session's answers: no broker and no sockets."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

import pytest

from notifbus import ABSENT, NEXT, STOP, Complete, MethodCallError, MissingPluginError, ProtocolViolation
from notifbus._framing import FrameDecoder, encode_frame
from notifbus._paths import resolve_socket_path
from notifbus._session import Session

from samples import same_json


def frame(obj: object) -> bytes:
    body = json.dumps(obj).encode()
    return len(body).to_bytes(4, "big") + body


def fed_byte_by_byte(data: bytes) -> List[Any]:
    """Every frame a fresh decoder gives out while ``data`` is fed one byte at a time;
    checks that nothing is left over."""
    decoder = FrameDecoder()
    frames = []
    for byte in data:
        decoder.feed(bytes([byte]))
        got = decoder.next_frame()
        if got is not None:
            frames.append(got)
    assert decoder.buffered == 0
    return frames


def test_encode_is_big_endian_length_then_compact_utf8_json():
    data = encode_frame({"op": "post", "id": 1, "name": "é"})
    body = '{"op":"post","id":1,"name":"é"}'.encode("utf-8")
    assert data[:4] == len(body).to_bytes(4, "big")
    assert data[4:] == body


def test_encode_rejects_nan_and_unserializable_values():
    with pytest.raises(ValueError):
        encode_frame({"op": "post", "payload": float("nan")})
    with pytest.raises(TypeError):
        encode_frame({"op": "post", "payload": object()})


def test_values_deeper_than_json_goes_are_read_and_written_without_recursion():
    """Beyond the standard module's ~1,000 levels the codec reads and writes the same
    text without recursion; what the standard module can take, it takes itself."""
    deep = "[" * 300_000 + "1" + "]" * 300_000
    body = '{"op":"event","event":7,"observer":"o1","name":"deep","payload":{"a":' + deep + "}}"
    decoder = FrameDecoder()
    decoder.feed(len(body).to_bytes(4, "big") + body.encode())
    got = decoder.next_frame()
    assert (got["op"], got["event"], got["name"]) == ("event", 7, "deep")
    level, depth = got["payload"]["a"], 1
    while isinstance(level, list):
        level, depth = level[0], depth + 1
    assert (depth, level) == (300_001, 1)
    assert encode_frame(got)[4:] == body.encode()
    for bad in ["[" * 5_000, "[" * 5_000 + "]" * 4_999 + "}", "[" * 5_000 + "NaN" + "]" * 5_000]:
        decoder = FrameDecoder()
        raw = ('{"payload":' + bad + "}").encode()
        decoder.feed(len(raw).to_bytes(4, "big") + raw)
        with pytest.raises(ProtocolViolation, match="not valid UTF-8 JSON"):
            decoder.next_frame()


def test_the_codec_without_recursion_writes_and_reads_what_json_does():
    """``_deep_json`` against the standard module on seeded random values: the same text
    written (compact, with and without ASCII escapes), the same values read back."""
    import random

    from notifbus import _deep_json

    seed = 20261207
    rng = random.Random(seed)
    scalars = [None, True, False, 0, -12, 3.5, 1e300, -0.0, 2**70, "", "x", 'é\u2028"\\\n\ud800']

    def value(depth: int = 0) -> Any:
        roll = rng.random()
        if depth > 6 or roll < 0.3:
            return rng.choice(scalars)
        if roll < 0.65:
            return [value(depth + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(["a", "b", "é", 'k"', "1"]): value(depth + 1) for _ in range(rng.randrange(4))}

    for _ in range(2_000):
        v = value()
        for ascii_only in (False, True):
            text = json.dumps(v, separators=(",", ":"), ensure_ascii=ascii_only, allow_nan=False)
            assert _deep_json.dumps(v, ensure_ascii=ascii_only) == text, f"seed {seed}"
        spaced = json.dumps(v, indent=1)
        assert repr(_deep_json.loads(spaced)) == repr(json.loads(spaced)), f"seed {seed}: {spaced}"
    assert (
        _deep_json.dumps({1: [1.0, {None: True}], 2.5: "x", False: []})
        == '{"1":[1.0,{"null":true}],"2.5":"x","false":[]}'
    )
    for bad in ["", "[", "[1,]", '{"a" 1}', "NaN", "[1] x", '{"a":1,}', "tru", "-", "[01]", '"\\x"']:
        with pytest.raises(ValueError):
            _deep_json.loads(bad)
    for unwritable, error in [(float("nan"), ValueError), ({(1, 2): 1}, TypeError), ({1, 2}, TypeError)]:
        with pytest.raises(error):
            _deep_json.dumps(unwritable)
    circular: List[Any] = []
    circular.append(circular)
    with pytest.raises(ValueError, match="Circular"):
        _deep_json.dumps(circular)


def test_decoder_whole_byte_by_byte_and_concatenated():
    frames = [{"op": "reply", "id": 1, "result": None}, {"op": "event", "event": 2, "payload": {"ü": [1, 2]}}]
    stream = b"".join(frame(f) for f in frames)

    decoder = FrameDecoder()
    decoder.feed(stream)
    assert [decoder.next_frame(), decoder.next_frame(), decoder.next_frame()] == frames + [None]

    assert fed_byte_by_byte(stream) == frames


def test_decoder_waits_for_truncated_frame():
    data = frame({"op": "reply", "id": 3, "result": {}})
    decoder = FrameDecoder()
    decoder.feed(data[:-1])
    assert decoder.next_frame() is None
    decoder.feed(data[-1:])
    assert decoder.next_frame() == {"op": "reply", "id": 3, "result": {}}


def test_decoder_accepts_frames_longer_than_max_frame():
    big = {"op": "reply", "id": 1, "result": "x" * (2 * 1048576)}
    decoder = FrameDecoder()
    decoder.feed(frame(big))
    assert decoder.next_frame() == big


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00\x00\x00",
        b"\x00\x00\x00\x02[]",
        b"\x00\x00\x00\x03\xff\xfe{",
        b"\x00\x00\x00\x04nope",
    ],
    ids=["zero-length", "array", "bad-utf8", "bad-json"],
)
def test_decoder_rejects_broken_frames(data):
    decoder = FrameDecoder()
    decoder.feed(data)
    with pytest.raises(ProtocolViolation):
        decoder.next_frame()


def test_socket_path_resolution_order():
    env = {"NOTIFBUS_SOCKET": "/a/env.sock", "XDG_RUNTIME_DIR": "/run/user/7"}
    assert resolve_socket_path("/given.sock", env, 7) == "/given.sock"
    assert resolve_socket_path(None, env, 7) == "/a/env.sock"
    assert resolve_socket_path(None, {"XDG_RUNTIME_DIR": "/run/user/7"}, 7) == "/run/user/7/notifbus.sock"
    assert (
        resolve_socket_path(None, {"NOTIFBUS_SOCKET": "", "XDG_RUNTIME_DIR": ""}, 7) == "/tmp/notifbus-7/notifbus.sock"
    )
    assert resolve_socket_path(None, {}, 1000) == "/tmp/notifbus-1000/notifbus.sock"


def body(data: bytes) -> dict:
    assert int.from_bytes(data[:4], "big") == len(data) - 4
    return json.loads(data[4:])


def test_answers_for_each_verdict():
    session = Session()
    assert body(session.answer(4, NEXT)) == {"op": "next", "event": 4}
    assert body(session.answer(4, None)) == {"op": "next", "event": 4}
    assert body(session.answer(4, STOP)) == {"op": "stop", "event": 4}
    assert body(session.answer(4, Complete(["banner"]))) == {"op": "complete", "event": 4, "value": ["banner"]}
    assert body(session.answer(4, Complete())) == {"op": "complete", "event": 4, "value": None}
    assert body(session.answer(4, "nonsense")) == {"op": "next", "event": 4}
    assert body(session.answer(4, Complete(object()))) == {"op": "next", "event": 4}
    assert body(session.answer_failure(4, RuntimeError("boom"))) == {"op": "next", "event": 4}


def test_method_returns_keep_details_absent_or_null():
    session = Session()
    assert body(session.method_return(9, {"a": 1})) == {"op": "return", "call": 9, "result": {"a": 1}}
    assert body(session.method_return(9, None)) == {"op": "return", "call": 9, "result": None}
    absent = body(session.method_failure(9, MethodCallError("E", "m")))
    assert absent == {"op": "return", "call": 9, "error": {"code": "E", "message": "m"}}
    null = body(session.method_failure(9, MethodCallError("E", "m", None)))
    assert null == {"op": "return", "call": 9, "error": {"code": "E", "message": "m", "details": None}}
    missing = body(session.method_failure(9, MissingPluginError()))
    assert missing["error"]["code"] == "not_implemented"
    builtin = body(session.method_failure(9, NotImplementedError()))
    assert builtin["error"]["code"] == "not_implemented"
    other = body(session.method_failure(9, KeyError("k")))
    assert other["error"] == {"code": "error", "message": "'k'"}
    unsendable = body(session.method_return(9, {1, 2}))
    assert unsendable["error"]["code"] == "error"


def test_method_call_error_details_marker():
    assert MethodCallError("E", "m").has_details is False
    assert MethodCallError("E", "m").details is None
    assert MethodCallError("E", "m", None).has_details is True
    assert MethodCallError("E", "m", ABSENT).has_details is False


# -- shared vectors (Protocol/vectors/framing.json) -------------------------------------

VECTORS_PATH = Path(__file__).resolve().parents[3] / "Protocol" / "vectors" / "framing.json"


def load_vectors(kind: str) -> List[Dict[str, Any]]:
    if not VECTORS_PATH.is_file():
        return []
    with open(VECTORS_PATH, encoding="utf-8") as handle:
        return list(json.load(handle)[kind])


def test_vectors_are_present():
    assert VECTORS_PATH.is_file(), f"{VECTORS_PATH} is missing"
    assert load_vectors("valid") and load_vectors("invalid")


@pytest.mark.parametrize("vector", load_vectors("valid"), ids=lambda v: v["name"])
def test_valid_vector_decodes_whole_and_byte_by_byte(vector):
    data = bytes.fromhex(vector["hex"])
    decoder = FrameDecoder()
    decoder.feed(data)
    assert same_json(decoder.next_frame(), vector["json"])
    assert decoder.buffered == 0

    decoded = fed_byte_by_byte(data)
    assert len(decoded) == 1 and same_json(decoded[0], vector["json"])

    decoder = FrameDecoder()
    decoder.feed(data * 3)
    assert all(same_json(decoder.next_frame(), vector["json"]) for _ in range(3))
    assert decoder.next_frame() is None


@pytest.mark.parametrize("vector", load_vectors("valid"), ids=lambda v: v["name"])
def test_valid_vector_survives_encoding(vector):
    decoder = FrameDecoder()
    decoder.feed(encode_frame(vector["json"]))
    assert same_json(decoder.next_frame(), vector["json"])


@pytest.mark.parametrize("vector", load_vectors("invalid"), ids=lambda v: v["name"])
def test_invalid_vector(vector):
    data = bytes.fromhex(vector["hex"])
    decoder = FrameDecoder()
    decoder.feed(data)
    length = int.from_bytes(data[:4], "big") if len(data) >= 4 else None
    if vector["error"] == "incomplete" or (vector["error"] == "frame_too_large" and length):
        # A client applies no maxFrame to what it reads: a long frame is just incomplete.
        assert decoder.next_frame() is None
    else:
        with pytest.raises(ProtocolViolation):
            decoder.next_frame()
