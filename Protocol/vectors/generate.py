#!/usr/bin/env python3
"""Writes framing.json and messages.json beside this file from the tables below.

Framing vectors are written as the exact body bytes; the script adds the length prefix
and derives each valid vector's "json" by parsing those bytes, so hex and json always
agree. Message vectors are one request or answer each, with the reply a broker must give.
The output is deterministic: running it twice gives the same files.

Python 3 standard library only. Run: python3 Protocol/vectors/generate.py [--check]
(--check writes nothing and exits 1 when the files on disk differ from what it would write).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent

#: The broker's default --max-frame, and the limit the framing vectors assume.
MAX_FRAME = 1_048_576


# ---------------------------------------------------------------------------------------
# Framing vectors
# ---------------------------------------------------------------------------------------


def nested(depth: int) -> str:
    """An array/object nest `depth` levels deep around the string "core"."""
    text = '"core"'
    for level in range(depth):
        text = "[" + text + "]" if level % 2 == 0 else '{"d":' + text + "}"
    return text


VALID_BODIES: List[tuple] = [
    # Every request op.
    ("hello", b'{"op":"hello","id":1,"protocol":1,"name":"mail-app"}'),
    ("ping", b'{"op":"ping","id":2}'),
    ("subscribe", b'{"op":"subscribe","id":3,"events":["willPresent","didReceive"],"priority":10,"key":"mail"}'),
    ("unsubscribe by observer", b'{"op":"unsubscribe","id":4,"observer":"o4"}'),
    ("unsubscribe by key, string id", b'{"op":"unsubscribe","id":"u-4","key":"mail"}'),
    (
        "post with a nested didReceive payload",
        b'{"op":"post","id":5,"name":"didReceive","payload":{"actionIdentifier":'
        b'"com.apple.UNNotificationDefaultActionIdentifier","notification":{"identifier":"n-1",'
        b'"source":"remote","content":{"title":"Hi","badge":3,"userInfo":{"emailId":"e-1",'
        b'"tags":["a","b"],"meta":{"read":false,"score":null}}}}}}',
    ),
    ("handle a whole channel", b'{"op":"handle","id":6,"channel":"notification_interaction","method":null}'),
    ("unhandle", b'{"op":"unhandle","id":7,"handler":"h2"}'),
    (
        "invoke with nested arguments",
        b'{"op":"invoke","id":8,"channel":"notification_interaction","method":"m","arguments":{"list":[1,[2,[3]]],"flag":true}}',
    ),
    ("put", b'{"op":"put","id":9,"slot":"launch","value":{"emailId":"e-1"}}'),
    ("take with wait", b'{"op":"take","id":10,"slot":"launch","wait":5000}'),
    ("peek", b'{"op":"peek","id":12,"slot":"launch"}'),
    (
        "post with an idempotency key",
        b'{"op":"post","id":5,"name":"mail.arrived","once":"nats/dev-1/42","payload":{"n":1}}',
    ),
    ("put with an idempotency key", b'{"op":"put","id":9,"slot":"launch","value":1,"once":"launch-1"}'),
    (
        "setCategories",
        b'{"op":"setCategories","id":13,"categories":[{"identifier":"INVITE","options":[],"actions":['
        b'{"identifier":"ACCEPT","title":"Accept","options":["foreground"]},'
        b'{"identifier":"DECLINE","title":"Decline","options":["destructive"]}]},'
        b'{"identifier":"MESSAGE","options":["customDismissAction","hiddenPreviewsShowTitle"],"actions":['
        b'{"identifier":"REPLY","title":"Reply","options":[],"textInput":{"buttonTitle":"Send","placeholder":"Message"}}]}]}',
    ),
    ("getCategories", b'{"op":"getCategories","id":14}'),
    ("status", b'{"op":"status","id":15}'),
    ("status page", b'{"op":"status","id":15,"page":"o10:4"}'),
    ("monitor", b'{"op":"monitor","id":16}'),
    # Answers.
    ("next", b'{"op":"next","event":12}'),
    ("complete with a value", b'{"op":"complete","event":12,"value":["banner","sound"]}'),
    ("stop", b'{"op":"stop","event":12}'),
    ("return with a result", b'{"op":"return","call":31,"result":{"emailId":"e-1"}}'),
    (
        "return with an error and details",
        b'{"op":"return","call":31,"error":{"code":"not_implemented","message":"no such method","details":{"tried":["m"]}}}',
    ),
    # Frames the broker writes.
    (
        "reply to hello",
        b'{"op":"reply","id":1,"result":{"protocol":1,"server":"notifbus/0.1.0","client":"c7","maxFrame":1048576}}',
    ),
    ("error frame", b'{"op":"reply","id":null,"error":{"code":"bad_json","message":"unexpected byte at byte 0"}}'),
    ("reply to a repeat", b'{"op":"reply","id":9,"result":{"replaced":false,"delivered":false},"repeat":true}'),
    (
        "interrupted repeat",
        b'{"op":"reply","id":"r","error":{"code":"interrupted","message":"the event\'s chain was cut when the broker stopped; '
        b'the observers before the cut saw it; it will not run again"},"repeat":true}',
    ),
    ("once_conflict", b'{"op":"reply","id":10,"error":{"code":"once_conflict","message":"m","details":{"op":"put"}}}'),
    ("event", b'{"op":"event","event":12,"observer":"o2","name":"didReceive","payload":null}'),
    ("evicted observer", b'{"op":"evicted","observer":"o1","by":"o4"}'),
    ("evicted handler", b'{"op":"evicted","handler":"h1","by":"h2"}'),
    ("call", b'{"op":"call","call":31,"handler":"h2","channel":"c","method":"m","arguments":null,"from":"c9"}'),
    ("seen", b'{"op":"seen","dir":"in","client":"c7","frame":{"op":"ping","id":2}}'),
    # Text and numbers.
    (
        "raw UTF-8: two-, three- and four-byte sequences",
        '{"op":"post","id":"ünï-1","name":"日本語","payload":{"greek":"αβγ","emoji":"😀","mixed":"a€𝄞z"}}'.encode(
            "utf-8"
        ),
    ),
    (
        "every escape",
        b'{"op":"put","id":20,"slot":"esc","value":"q\\" b\\\\ s\\/ \\b\\f\\n\\r\\t \\u0000 \\u00e9 \\u20AC \\uD83D\\uDE00"}',
    ),
    ("lone surrogate escape (valid JSON grammar)", b'{"op":"put","id":21,"slot":"s","value":"\\ud800"}'),
    ("key written with an escape", b'{"o\\u0070":"ping","id":22}'),
    ("whitespace around and inside the body", b' \t\r\n{ "op" : "ping" ,\n\t"id" : 23 }\r\n\t '),
    ("empty object", b"{}"),
    (
        "numbers",
        b'{"op":"post","id":9007199254740991,"name":"n","payload":[0,1,-1,1.5,-2.25e-3,1E+2,6.02e23,123456789]}',
    ),
    ("literals", b'{"op":"post","id":24,"name":"l","payload":{"t":true,"f":false,"n":null,"e":"","a":[],"o":{}}}'),
    (
        "deep nesting (100 levels)",
        ('{"op":"post","id":25,"name":"deep","payload":' + nested(100) + "}").encode("utf-8"),
    ),
]

INVALID_BODIES: List[tuple] = [
    ("invalid UTF-8 (0xff)", b'{"op":"ping","id":"\xff"}'),
    ("invalid UTF-8 (stray continuation byte)", b'{"op":"ping","id":"\x80"}'),
    ("invalid UTF-8 (overlong '/')", b'{"op":"ping","id":"\xc0\xaf"}'),
    ("invalid UTF-8 (encoded surrogate U+D800)", b'{"op":"ping","id":"\xed\xa0\x80"}'),
    ("invalid UTF-8 (truncated sequence)", b'{"op":"ping","id":"\xe6\x97"}'),
    ("invalid UTF-8 (above U+10FFFF)", b'{"op":"ping","id":"\xf4\x90\x80\x80"}'),
    ("top-level array", b'[{"op":"ping","id":1}]'),
    ("top-level string", b'"ping"'),
    ("top-level number", b"1"),
    ("top-level null", b"null"),
    ("whitespace only", b" \n"),
    ("trailing garbage after the object", b'{"op":"ping","id":1}x'),
    ("two objects in one frame", b'{"op":"ping","id":1}{"op":"ping","id":2}'),
    ("unterminated string", b'{"op":"ping","id":"abc}'),
    ("unterminated object", b'{"op":"ping","id":1'),
    ("bad escape", b'{"op":"ping","id":"\\x41"}'),
    ("truncated \\u escape", b'{"op":"ping","id":"\\u12"}'),
    ("leading zero", b'{"op":"ping","id":01}'),
    ("number with a plus sign", b'{"op":"ping","id":+1}'),
    ("number without integer digits", b'{"op":"ping","id":.5}'),
    ("number without fraction digits", b'{"op":"ping","id":1.}'),
    ("control character in a string", b'{"op":"ping","id":"a\nb"}'),
    ("NaN literal", b'{"op":"post","id":1,"name":"n","payload":NaN}'),
    ("Infinity literal", b'{"op":"post","id":1,"name":"n","payload":Infinity}'),
    ("trailing comma", b'{"op":"ping","id":1,}'),
    ("single quotes", b"{'op':'ping','id':1}"),
    ("unquoted key", b'{op:"ping","id":1}'),
    ("missing colon", b'{"op" "ping","id":1}'),
    ("comment", b'{"op":"ping","id":1 /* hi */}'),
    ("misspelt literal", b'{"op":"post","id":1,"name":"n","payload":nul}'),
]

INVALID_RAW: List[tuple] = [
    # (name, whole byte string including any header, error)
    ("zero length", bytes.fromhex("00000000"), "frame_too_large"),
    ("length maxFrame+1, header only", (MAX_FRAME + 1).to_bytes(4, "big"), "frame_too_large"),
    ("length 2^32-1, header only", bytes.fromhex("ffffffff"), "frame_too_large"),
    ("zero length followed by a body", bytes.fromhex("00000000") + b'{"op":"ping","id":1}', "frame_too_large"),
    ("header of 3 bytes", bytes.fromhex("000000"), "incomplete"),
    ("header only, body not yet sent", bytes.fromhex("00000014"), "incomplete"),
    ("truncated body", (20).to_bytes(4, "big") + b'{"op":"ping"', "incomplete"),
    ("length maxFrame, body not yet sent", MAX_FRAME.to_bytes(4, "big") + b'{"op":', "incomplete"),
]


def frame(body: bytes) -> bytes:
    return len(body).to_bytes(4, "big") + body


def strict_parse(body: bytes) -> Any:
    """Parses like the broker: UTF-8 must be valid, NaN and Infinity are not JSON."""

    def reject_constant(name: str) -> Any:
        raise ValueError(f"{name} is not JSON")

    return json.loads(body.decode("utf-8", errors="strict"), parse_constant=reject_constant)


def framing_vectors() -> Dict[str, Any]:
    valid = []
    for name, body in VALID_BODIES:
        assert 1 <= len(body) <= MAX_FRAME, name
        value = strict_parse(body)
        assert isinstance(value, dict), name
        valid.append({"name": name, "hex": frame(body).hex(), "json": value})
    invalid = []
    for name, body in INVALID_BODIES:
        try:
            value = strict_parse(body)
        except (UnicodeDecodeError, ValueError):
            value = None
        assert not isinstance(value, dict), f"{name} parses as an object"
        invalid.append({"name": name, "hex": frame(body).hex(), "error": "bad_json"})
    for name, raw, error in INVALID_RAW:
        invalid.append({"name": name, "hex": raw.hex(), "error": error})
    names = [v["name"] for v in valid + invalid]
    assert len(names) == len(set(names)), "vector names must be unique"
    return {
        "description": (
            "Frames of notifbus protocol v1 as bytes. A frame is a 4-byte big-endian length N "
            "(1 <= N <= maxFrame) and N bytes of UTF-8 JSON whose top-level value is an object. "
            "'hex' is the whole frame, prefix included, in lowercase hex. A valid vector decodes "
            "to exactly one body equal to 'json'. An invalid vector gives 'frame_too_large' "
            "(the length is 0 or above maxFrame: a reader decides from the 4-byte header alone), "
            "'bad_json' (the frame is complete but its body is not a UTF-8 JSON object; the "
            "stream stays in step) or 'incomplete' (a decoder must wait for more bytes, not fail). "
            "Generated by generate.py; edit that, not this file."
        ),
        "maxFrame": MAX_FRAME,
        "valid": valid,
        "invalid": invalid,
    }


# ---------------------------------------------------------------------------------------
# Message vectors
# ---------------------------------------------------------------------------------------

_ABSENT = object()
CASES: List[Dict[str, Any]] = []

DEFAULT_ACTION = "com.apple.UNNotificationDefaultActionIdentifier"
DISMISS_ACTION = "com.apple.UNNotificationDismissActionIdentifier"
NAME_256 = "n" * 256
NAME_257 = "n" * 257


def case(
    name: str,
    send: Any = _ABSENT,
    *,
    text: Optional[str] = None,
    id: Any = _ABSENT,
    result: Any = _ABSENT,
    error: Optional[str] = None,
    greeted: bool = True,
    closes: bool = False,
) -> None:
    """Adds one case. The expected id defaults to the id sent, when it is usable."""
    assert (send is _ABSENT) != (text is None), name
    assert (result is _ABSENT) != (error is None), name
    if id is _ABSENT:
        sent = send if send is not _ABSENT else json.loads(text)
        id = sent.get("id") if isinstance(sent, dict) else None
    entry: Dict[str, Any] = {"name": name, "greeted": greeted}
    if send is not _ABSENT:
        entry["send"] = send
    else:
        entry["sendText"] = text
    entry["expect"] = {"id": id, "error": error} if error is not None else {"id": id, "result": result}
    entry["closes"] = closes
    CASES.append(entry)


def bad(name: str, send: Any = _ABSENT, **kw: Any) -> None:
    case(name, send, error="bad_request", **kw)


def notification(**content: Any) -> Dict[str, Any]:
    return {"identifier": "n-1", "content": content}


def post(id: int, name: str, payload: Any = _ABSENT) -> Dict[str, Any]:
    msg: Dict[str, Any] = {"op": "post", "id": id, "name": name}
    if payload is not _ABSENT:
        msg["payload"] = payload
    return msg


def categories(cats: Any) -> Dict[str, Any]:
    return {"op": "setCategories", "id": 1, "categories": cats}


def action(**fields: Any) -> Dict[str, Any]:
    out = {"identifier": "A", "title": "Act"}
    out.update(fields)
    return {k: v for k, v in out.items() if v is not _ABSENT}


def category(actions: Any = None, **fields: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {"identifier": "C", "actions": [] if actions is None else actions}
    out.update(fields)
    return {k: v for k, v in out.items() if v is not _ABSENT}


def build_cases() -> None:
    # -- Greeting -------------------------------------------------------------------------
    # hello_required echoes the request's id when it is usable (decision 17).
    case("request before hello", {"op": "ping", "id": 7}, greeted=False, error="hello_required", closes=True)
    case(
        "request with a string id before hello",
        {"op": "ping", "id": "p-1"},
        greeted=False,
        error="hello_required",
        closes=True,
    )
    case("unknown op before hello", {"op": "frobnicate", "id": 1}, greeted=False, error="hello_required", closes=True)
    case("missing op before hello", {"id": 1}, greeted=False, error="hello_required", closes=True)
    case("request without id before hello", {"op": "ping"}, greeted=False, id=None, error="hello_required", closes=True)
    case(
        "unusable id before hello",
        {"op": "ping", "id": -1},
        greeted=False,
        id=None,
        error="hello_required",
        closes=True,
    )
    case("answer before hello", {"op": "next", "event": 1}, greeted=False, id=None, error="hello_required", closes=True)
    case("malformed answer before hello", {"op": "stop"}, greeted=False, id=None, error="hello_required", closes=True)
    case(
        "return before hello",
        {"op": "return", "call": 1, "result": None},
        greeted=False,
        id=None,
        error="hello_required",
        closes=True,
    )
    case("bad JSON before hello stays open", text="{", greeted=False, id=None, error="bad_json")
    case(
        "top-level array before hello stays open",
        text='[{"op":"hello","id":1,"protocol":1}]',
        greeted=False,
        id=None,
        error="bad_json",
    )
    case(
        "hello with protocol 2",
        {"op": "hello", "id": 1, "protocol": 2},
        greeted=False,
        error="unsupported_protocol",
        closes=True,
    )
    case(
        "hello with protocol 0",
        {"op": "hello", "id": "h0", "protocol": 0},
        greeted=False,
        error="unsupported_protocol",
        closes=True,
    )
    case(
        "hello with protocol -1",
        {"op": "hello", "id": 1, "protocol": -1},
        greeted=False,
        error="unsupported_protocol",
        closes=True,
    )
    bad("hello without protocol stays open and ungreeted", {"op": "hello", "id": 1}, greeted=False)
    bad("hello with protocol null", {"op": "hello", "id": 1, "protocol": None}, greeted=False)
    bad("hello with string protocol", {"op": "hello", "id": 1, "protocol": "1"}, greeted=False)
    bad("hello with protocol 1.0", text='{"op":"hello","id":1,"protocol":1.0}', greeted=False)
    bad("hello with protocol 1e0", text='{"op":"hello","id":1,"protocol":1e0}', greeted=False)
    bad("hello without id", {"op": "hello", "protocol": 1}, greeted=False, id=None)
    bad("hello with unusable id", {"op": "hello", "id": -1, "protocol": 1}, greeted=False, id=None)
    bad("hello with unknown field", {"op": "hello", "id": 1, "protocol": 1, "version": 1}, greeted=False)
    bad("hello with mistyped name", {"op": "hello", "id": 1, "protocol": 1, "name": 5}, greeted=False)
    bad("hello with duplicate protocol", text='{"op":"hello","id":1,"protocol":1,"protocol":1}', greeted=False)
    bad("second hello", {"op": "hello", "id": 2, "protocol": 1})
    bad("second hello with protocol 2 stays open", {"op": "hello", "id": 2, "protocol": 2})

    # -- Request ids ----------------------------------------------------------------------
    case("integer id 0", {"op": "ping", "id": 0}, result={})
    case("integer id 2^53-1", {"op": "ping", "id": 9007199254740991}, result={})
    case("string id", {"op": "ping", "id": "abc"}, result={})
    case("string id of 1 byte", {"op": "ping", "id": "x"}, result={})
    case("string id of 256 bytes", {"op": "ping", "id": "i" * 256}, result={})
    case("string id of 256 bytes in two-byte characters", {"op": "ping", "id": "é" * 128}, result={})
    case("unicode string id", {"op": "ping", "id": "ïd-日本-😀"}, result={})
    case("string id with escapes", text='{"op":"ping","id":"\\u0041\\n\\"q\\""}', id='A\n"q"', result={})
    case("string id that looks like a number", {"op": "ping", "id": "1"}, result={})
    bad("integer id 2^53", {"op": "ping", "id": 9007199254740992}, id=None)
    bad("integer id above 2^64", text='{"op":"ping","id":100000000000000000000}', id=None)
    bad("negative id", {"op": "ping", "id": -1}, id=None)
    bad("id -0", text='{"op":"ping","id":-0}', id=None)
    bad("id 1.0", text='{"op":"ping","id":1.0}', id=None)
    bad("id 1e2", text='{"op":"ping","id":1e2}', id=None)
    bad("id 1E2", text='{"op":"ping","id":1E2}', id=None)
    bad("id 0.5", text='{"op":"ping","id":0.5}', id=None)
    bad("empty string id", {"op": "ping", "id": ""}, id=None)
    bad("string id of 257 bytes", {"op": "ping", "id": "i" * 257}, id=None)
    bad("string id of 258 bytes in two-byte characters", {"op": "ping", "id": "é" * 129}, id=None)
    bad("boolean id", {"op": "ping", "id": True}, id=None)
    bad("null id", {"op": "ping", "id": None}, id=None)
    bad("object id", {"op": "ping", "id": {}}, id=None)
    bad("array id", {"op": "ping", "id": [1]}, id=None)
    bad("missing id", {"op": "ping"}, id=None)
    bad("empty object", {}, id=None)
    bad("unusable id is checked before an unknown op", {"op": "frobnicate", "id": -1}, id=None)
    bad("unusable id is checked before unknown fields", {"op": "ping", "id": "", "x": 1}, id=None)

    # -- op -------------------------------------------------------------------------------
    bad("missing op", {"id": 1})
    bad("numeric op", {"op": 5, "id": 1})
    bad("null op", {"op": None, "id": 1})
    bad("array op", {"op": ["ping"], "id": 1})
    case("unknown op", {"op": "frobnicate", "id": 1}, error="unknown_op")
    case("op is case-sensitive", {"op": "PING", "id": 1}, error="unknown_op")
    case("empty op", {"op": "", "id": 1}, error="unknown_op")
    case("client sends reply", {"op": "reply", "id": 1, "result": None}, error="unknown_op")
    case("client sends event", {"op": "event", "id": 1}, error="unknown_op")
    case("client sends call", {"op": "call", "id": 1}, error="unknown_op")
    case("unknown op is checked before unknown fields", {"op": "frobnicate", "id": 1, "x": 1}, error="unknown_op")

    # -- Unknown and duplicate fields -----------------------------------------------------
    bad("unknown field", {"op": "ping", "id": 1, "extra": 1})
    bad("unknown field set to null", {"op": "ping", "id": 1, "extra": None})
    bad("misspelt key", {"op": "subscribe", "id": 1, "events": ["e"], "kye": "k"})
    bad("unknown field before a missing one", {"op": "take", "id": 1, "slt": "s"})
    bad("duplicate id", text='{"op":"ping","id":1,"id":1}')
    bad("duplicate op", text='{"op":"ping","op":"ping","id":1}')
    bad("duplicate slot", text='{"op":"peek","id":1,"slot":"vec-dup-a","slot":"vec-dup-b"}')
    bad("duplicate null field", text='{"op":"take","id":1,"slot":"vec-dup-c","wait":null,"wait":null}')
    case("whitespace around the body", text=' \n\t{ "op" : "ping" ,\r\n "id" : 7 } \n', result={})
    case("key written with an escape", text='{"o\\u0070":"ping","id":8}', result={})

    # -- ping, status, monitor, getCategories ---------------------------------------------
    case("ping", {"op": "ping", "id": 2}, result={})
    bad("status with unknown field", {"op": "status", "id": 1, "verbose": True})
    bad("status with a page no reply wrote", {"op": "status", "id": 1, "page": "x1"})
    bad("status with a non-string page", {"op": "status", "id": 1, "page": 3})
    bad("status with an empty page", {"op": "status", "id": 1, "page": ""})
    bad("status with a hand-made page", {"op": "status", "id": 1, "page": "o1:0"})
    case("monitor", {"op": "monitor", "id": 16}, result={})
    bad("monitor with unknown field", {"op": "monitor", "id": 1, "filter": "x"})
    case("getCategories on a fresh broker", {"op": "getCategories", "id": 14}, result={"categories": []})
    bad("getCategories with unknown field", {"op": "getCategories", "id": 1, "categories": []})

    # -- subscribe ------------------------------------------------------------------------
    sub = {"op": "subscribe", "id": 3}
    bad("subscribe without events", dict(sub))
    bad("subscribe with events null", dict(sub, events=None))
    bad("subscribe with events a string", dict(sub, events="e"))
    bad("subscribe with events an object", dict(sub, events={"e": 1}))
    bad("subscribe with no events", dict(sub, events=[]))
    bad("subscribe with 65 events", dict(sub, events=[f"e{i}" for i in range(65)]))
    bad("subscribe with duplicate events", dict(sub, events=["a", "b", "a"]))
    bad("subscribe with an event name of 0 bytes", dict(sub, events=[""]))
    bad("subscribe with an event name of 257 bytes", dict(sub, events=[NAME_257]))
    bad("subscribe with a non-string event", dict(sub, events=[5]))
    bad("subscribe with a null event", dict(sub, events=[None]))
    bad("subscribe with priority 2^31", dict(sub, events=["e"], priority=2147483648))
    bad("subscribe with priority -2^31-1", dict(sub, events=["e"], priority=-2147483649))
    bad("subscribe with priority 1.5", dict(sub, events=["e"], priority=1.5))
    bad("subscribe with priority 10.0", text='{"op":"subscribe","id":3,"events":["e"],"priority":10.0}')
    bad("subscribe with priority 1e1", text='{"op":"subscribe","id":3,"events":["e"],"priority":1e1}')
    bad("subscribe with string priority", dict(sub, events=["e"], priority="10"))
    bad("subscribe with key of 0 bytes", dict(sub, events=["e"], key=""))
    bad("subscribe with key of 257 bytes", dict(sub, events=["e"], key=NAME_257))
    bad("subscribe with numeric key", dict(sub, events=["e"], key=5))
    bad("subscribe with resume a number", dict(sub, events=["e"], key="vec-resume", resume=1))
    bad("subscribe with resume a string", dict(sub, events=["e"], resume="true"))

    # -- unsubscribe ----------------------------------------------------------------------
    unsub = {"op": "unsubscribe", "id": 4}
    bad("unsubscribe with neither observer nor key", dict(unsub))
    bad("unsubscribe with both observer and key null", dict(unsub, observer=None, key=None))
    bad("unsubscribe with both observer and key", dict(unsub, observer="o1", key="vec-unsub-both"))
    bad("unsubscribe with numeric observer", dict(unsub, observer=1))
    bad("unsubscribe with numeric key", dict(unsub, key=1))
    bad("unsubscribe with key of 0 bytes", dict(unsub, key=""))
    bad("unsubscribe with key of 257 bytes", dict(unsub, key=NAME_257))
    case("unsubscribe an unknown observer", dict(unsub, observer="o999999999"), error="not_found")
    case("unsubscribe a malformed observer id", dict(unsub, observer="observer-1"), error="not_found")
    case("unsubscribe an unused key", dict(unsub, key="vec-unused-key"), error="not_found")
    case(
        "unsubscribe with key null and an unknown observer",
        dict(unsub, observer="o999999998", key=None),
        error="not_found",
    )

    # -- post -----------------------------------------------------------------------------
    bad("post without name", {"op": "post", "id": 5, "payload": 1})
    bad("post with name null", post(5, None))
    bad("post with name of 0 bytes", post(5, ""))
    bad("post with name of 257 bytes", post(5, NAME_257))
    bad("post with numeric name", post(5, 5))
    bad("post with unknown field", {"op": "post", "id": 5, "name": "e", "payloads": {}})
    bad(
        "post unknown field is checked before the profile payload",
        {"op": "post", "id": 5, "name": "willPresent", "extra": 1},
    )

    # -- Notification profile: invalid_payload --------------------------------------------
    def ip(name: str, event: str, payload: Any = _ABSENT) -> None:
        case(name, post(5, event, payload), error="invalid_payload")

    n = notification(title="t")
    ip("willPresent without payload", "willPresent")
    ip("willPresent with payload null", "willPresent", None)
    ip("willPresent with an array payload", "willPresent", [n])
    ip("willPresent with a string payload", "willPresent", "n-1")
    ip("willPresent without notification", "willPresent", {})
    ip("willPresent with notification null", "willPresent", {"notification": None})
    ip("willPresent with a string notification", "willPresent", {"notification": "n-1"})
    ip("notification without identifier", "willPresent", {"notification": {"content": {}}})
    ip("notification with identifier null", "willPresent", {"notification": {"identifier": None, "content": {}}})
    ip("notification with numeric identifier", "willPresent", {"notification": {"identifier": 1, "content": {}}})
    ip(
        "notification with unknown source",
        "willPresent",
        {"notification": {"identifier": "n", "source": "push", "content": {}}},
    )
    ip(
        "notification with numeric source",
        "willPresent",
        {"notification": {"identifier": "n", "source": 1, "content": {}}},
    )
    ip("notification without content", "willPresent", {"notification": {"identifier": "n"}})
    ip("notification with content null", "willPresent", {"notification": {"identifier": "n", "content": None}})
    ip("notification with an array content", "willPresent", {"notification": {"identifier": "n", "content": []}})
    for field, value in [
        ("title", 5),
        ("subtitle", True),
        ("body", []),
        ("categoryIdentifier", 5),
        ("threadIdentifier", {}),
        ("sound", 1),
        ("userInfo", []),
        ("userInfo", "x"),
        ("badge", 1.5),
        ("badge", "3"),
        ("badge", True),
    ]:
        ip(f"content.{field} as {json.dumps(value)}", "willPresent", {"notification": notification(**{field: value})})
    case(
        "content.badge 1e0 (not an integer literal)",
        text='{"op":"post","id":5,"name":"willPresent","payload":{"notification":'
        '{"identifier":"n","content":{"badge":1e0}}}}',
        error="invalid_payload",
    )
    case(
        "content.badge 2.0 (not an integer literal)",
        text='{"op":"post","id":5,"name":"willPresent","payload":{"notification":'
        '{"identifier":"n","content":{"badge":2.0}}}}',
        error="invalid_payload",
    )
    ip("didReceive without payload", "didReceive")
    ip("didReceive without actionIdentifier", "didReceive", {"notification": n})
    ip("didReceive with numeric actionIdentifier", "didReceive", {"actionIdentifier": 1, "notification": n})
    ip("didReceive with actionIdentifier null", "didReceive", {"actionIdentifier": None, "notification": n})
    ip(
        "didReceive with numeric userText",
        "didReceive",
        {"actionIdentifier": DEFAULT_ACTION, "userText": 5, "notification": n},
    )
    ip("didReceive without notification", "didReceive", {"actionIdentifier": DEFAULT_ACTION})
    ip("didReceive with notification null", "didReceive", {"actionIdentifier": DEFAULT_ACTION, "notification": None})
    ip(
        "didReceive with a bad notification",
        "didReceive",
        {"actionIdentifier": DEFAULT_ACTION, "notification": {"identifier": "n", "content": {"sound": 1}}},
    )
    ip("openSettings with a numeric payload", "openSettings", 5)
    ip("openSettings with an array payload", "openSettings", [])
    ip("openSettings with a string notification", "openSettings", {"notification": "n"})
    ip("openSettings with a notification without identifier", "openSettings", {"notification": {"content": {}}})
    ip("openSettings with a notification without content", "openSettings", {"notification": {"identifier": "n"}})

    # -- Notification profile: invalid_action ---------------------------------------------
    def ia(name: str, payload: Dict[str, Any]) -> None:
        case(name, post(5, "didReceive", payload), error="invalid_action")

    ia("dismiss action without a category", {"actionIdentifier": DISMISS_ACTION, "notification": n})
    ia(
        "dismiss action with an unknown category",
        {"actionIdentifier": DISMISS_ACTION, "notification": notification(categoryIdentifier="VEC-NO-SUCH-CATEGORY")},
    )
    ia("custom action without a category", {"actionIdentifier": "REPLY", "notification": n})
    ia(
        "custom action with an unknown category",
        {"actionIdentifier": "REPLY", "notification": notification(categoryIdentifier="VEC-NO-SUCH-CATEGORY")},
    )
    ia("empty action identifier", {"actionIdentifier": "", "notification": n})
    ia("userText with the default action", {"actionIdentifier": DEFAULT_ACTION, "userText": "hi", "notification": n})
    ia("userText with the dismiss action", {"actionIdentifier": DISMISS_ACTION, "userText": "hi", "notification": n})

    # -- handle / unhandle ----------------------------------------------------------------
    hd = {"op": "handle", "id": 6}
    bad("handle without channel", dict(hd, method="m"))
    bad("handle with channel null", dict(hd, channel=None))
    bad("handle with channel of 0 bytes", dict(hd, channel=""))
    bad("handle with channel of 257 bytes", dict(hd, channel=NAME_257))
    bad("handle with numeric channel", dict(hd, channel=5))
    bad("handle with method of 0 bytes", dict(hd, channel="vec-c", method=""))
    bad("handle with method of 257 bytes", dict(hd, channel="vec-c", method=NAME_257))
    bad("handle with numeric method", dict(hd, channel="vec-c", method=5))
    bad("handle with unknown field", dict(hd, channel="vec-c", methods=["m"]))
    bad("handle with resume a number", dict(hd, channel="vec-c", resume=0))
    bad("unhandle without handler", {"op": "unhandle", "id": 7})
    bad("unhandle with handler null", {"op": "unhandle", "id": 7, "handler": None})
    bad("unhandle with numeric handler", {"op": "unhandle", "id": 7, "handler": 2})
    case("unhandle an unknown handler", {"op": "unhandle", "id": 7, "handler": "h999999999"}, error="not_found")
    case("unhandle a malformed handler id", {"op": "unhandle", "id": 7, "handler": "handler"}, error="not_found")

    # -- invoke ---------------------------------------------------------------------------
    inv = {"op": "invoke", "id": 8}
    bad("invoke without channel", dict(inv, method="m"))
    bad("invoke with channel of 0 bytes", dict(inv, channel="", method="m"))
    bad("invoke with numeric channel", dict(inv, channel=1, method="m"))
    bad("invoke without method", dict(inv, channel="vec-invoke"))
    bad("invoke with method null", dict(inv, channel="vec-invoke", method=None))
    bad("invoke with method of 0 bytes", dict(inv, channel="vec-invoke", method=""))
    bad("invoke with method of 257 bytes", dict(inv, channel="vec-invoke", method=NAME_257))
    bad("invoke with unknown field", dict(inv, channel="vec-invoke", method="m", args=[]))
    case(
        "invoke with no handler",
        dict(inv, channel="vec-no-handler", method="m", arguments={"a": [1]}),
        error="not_implemented",
    )
    case(
        "invoke with no handler, arguments null",
        dict(inv, channel="vec-no-handler", method="m", arguments=None),
        error="not_implemented",
    )
    case(
        "invoke with no handler, name of 256 bytes",
        dict(inv, channel=NAME_256, method=NAME_256),
        error="not_implemented",
    )

    # -- Slots ----------------------------------------------------------------------------
    bad("put without slot", {"op": "put", "id": 9, "value": 1})
    bad("put with slot of 0 bytes", {"op": "put", "id": 9, "slot": "", "value": 1})
    bad("put with slot of 257 bytes", {"op": "put", "id": 9, "slot": NAME_257, "value": 1})
    bad("put with numeric slot", {"op": "put", "id": 9, "slot": 5, "value": 1})
    bad("put without value", {"op": "put", "id": 9, "slot": "vec-put-novalue"})
    case(
        "put null into an unused slot",
        {"op": "put", "id": 9, "slot": "vec-put-null", "value": None},
        result={"replaced": False, "delivered": False},
    )
    case(
        "put into an unused slot",
        {"op": "put", "id": 9, "slot": "vec-put-once", "value": {"emailId": "e-1"}},
        result={"replaced": False, "delivered": False},
    )
    case(
        "put into a slot named with 256 bytes",
        {"op": "put", "id": 9, "slot": "s" * 256, "value": [1]},
        result={"replaced": False, "delivered": False},
    )
    bad("take without slot", {"op": "take", "id": 10})
    bad("take with slot of 0 bytes", {"op": "take", "id": 10, "slot": ""})
    bad("take with wait -1", {"op": "take", "id": 10, "slot": "vec-take-a", "wait": -1})
    bad("take with wait 600001", {"op": "take", "id": 10, "slot": "vec-take-a", "wait": 600001})
    bad("take with wait 1.5", {"op": "take", "id": 10, "slot": "vec-take-a", "wait": 1.5})
    bad("take with wait 10.0", text='{"op":"take","id":10,"slot":"vec-take-a","wait":10.0}')
    bad("take with string wait", {"op": "take", "id": 10, "slot": "vec-take-a", "wait": "10"})
    bad("take with boolean wait", {"op": "take", "id": 10, "slot": "vec-take-a", "wait": True})
    case("take from an unused slot", {"op": "take", "id": 10, "slot": "vec-take-unused"}, result=None)
    case("take with wait 0", {"op": "take", "id": 10, "slot": "vec-take-unused", "wait": 0}, result=None)
    case("take with wait null", {"op": "take", "id": 10, "slot": "vec-take-unused", "wait": None}, result=None)
    case(
        "take with wait 50 times out with null",
        {"op": "take", "id": 10, "slot": "vec-take-wait", "wait": 50},
        result=None,
    )
    bad("peek without slot", {"op": "peek", "id": 12})
    bad("peek with numeric slot", {"op": "peek", "id": 12, "slot": 5})
    bad("peek with slot of 257 bytes", {"op": "peek", "id": 12, "slot": NAME_257})
    case("peek at an unused slot", {"op": "peek", "id": 12, "slot": "vec-peek-unused"}, result=None)

    # -- setCategories --------------------------------------------------------------------
    case("setCategories with an empty set", categories([]), result={"count": 0})
    bad("setCategories without categories", {"op": "setCategories", "id": 1})
    bad("setCategories with categories null", categories(None))
    bad("setCategories with an object", categories({"identifier": "C", "actions": []}))
    bad("setCategories with a non-object category", categories(["C"]))
    bad("category without identifier", categories([{"actions": []}]))
    bad("category with identifier of 0 bytes", categories([category(identifier="")]))
    bad("category with identifier of 257 bytes", categories([category(identifier=NAME_257)]))
    bad("category with numeric identifier", categories([category(identifier=5)]))
    bad("category without actions", categories([{"identifier": "C"}]))
    bad("category with actions null", categories([{"identifier": "C", "actions": None}]))
    bad("category with actions an object", categories([{"identifier": "C", "actions": {}}]))
    bad("category with an unknown option", categories([category(options=["customDismiss"])]))
    bad("category with an action option", categories([category(options=["foreground"])]))
    bad("category with a numeric option", categories([category(options=[1])]))
    bad("category with options a string", categories([category(options="customDismissAction")]))
    bad("category with an unknown field", categories([category(hiddenPreviewsBodyPlaceholder="x")]))
    bad("category with intentIdentifiers a string", categories([category(intentIdentifiers="INStartCallIntent")]))
    bad("category with an intent identifier of 0 bytes", categories([category(intentIdentifiers=[""])]))
    bad("category with a numeric intent identifier", categories([category(intentIdentifiers=[1])]))
    bad("duplicate category identifiers", categories([category(), category()]))
    bad(
        "category with a duplicate field",
        text='{"op":"setCategories","id":1,"categories":[{"identifier":"C","actions":[],"actions":[]}]}',
    )
    bad("action not an object", categories([category(["A"])]))
    bad("action without identifier", categories([category([action(identifier=_ABSENT)])]))
    bad("action with identifier of 257 bytes", categories([category([action(identifier=NAME_257)])]))
    bad("action without title", categories([category([action(title=_ABSENT)])]))
    bad("action with numeric title", categories([category([action(title=5)])]))
    bad("action with an unknown option", categories([category([action(options=["background"])])]))
    bad("action with a category option", categories([category([action(options=["customDismissAction"])])]))
    bad("action with an unknown field", categories([category([action(icon="x")])]))
    bad("duplicate action identifiers", categories([category([action(), action(title="Again")])]))
    bad("textInput not an object", categories([category([action(textInput="Send")])]))
    bad("textInput without buttonTitle", categories([category([action(textInput={"placeholder": "p"})])]))
    bad("textInput with numeric buttonTitle", categories([category([action(textInput={"buttonTitle": 1})])]))
    bad(
        "textInput with numeric placeholder",
        categories([category([action(textInput={"buttonTitle": "Send", "placeholder": 1})])]),
    )
    bad(
        "textInput with an unknown field",
        categories([category([action(textInput={"buttonTitle": "Send", "maxLength": 10})])]),
    )
    bad(
        "a bad second category rejects the whole set",
        categories([category(identifier="VEC-OK"), category(identifier="VEC-BAD", options=["nope"])]),
    )

    # -- Answers --------------------------------------------------------------------------
    for op in ("next", "stop"):
        bad(f"{op} with an id", {"op": op, "event": 1, "id": 1}, id=None)
        bad(f"{op} without event", {"op": op}, id=None)
        bad(f"{op} with event null", {"op": op, "event": None}, id=None)
        bad(f"{op} with string event", {"op": op, "event": "1"}, id=None)
        bad(f"{op} with event 1.0", text='{"op":"%s","event":1.0}' % op, id=None)
        bad(f"{op} with unknown field", {"op": op, "event": 1, "observer": "o1"}, id=None)
    bad("complete with an id", {"op": "complete", "event": 1, "value": None, "id": 1}, id=None)
    bad("complete without event", {"op": "complete", "value": []}, id=None)
    bad("complete with event 1e0", text='{"op":"complete","event":1e0,"value":[]}', id=None)
    bad("complete with unknown field", {"op": "complete", "event": 1, "result": []}, id=None)
    bad("complete with a duplicate value", text='{"op":"complete","event":1,"value":1,"value":2}', id=None)
    bad("return with an id", {"op": "return", "call": 1, "result": None, "id": 1}, id=None)
    bad("return without call", {"op": "return", "result": 1}, id=None)
    bad("return with call 1.5", {"op": "return", "call": 1.5, "result": 1}, id=None)
    bad("return with call 1.0", text='{"op":"return","call":1.0,"result":1}', id=None)
    bad("return with string call", {"op": "return", "call": "1", "result": 1}, id=None)
    bad("return with neither result nor error", {"op": "return", "call": 1}, id=None)
    bad("return with error null and no result", {"op": "return", "call": 1, "error": None}, id=None)
    bad(
        "return with result and error",
        {"op": "return", "call": 1, "result": 1, "error": {"code": "x", "message": "y"}},
        id=None,
    )
    bad(
        "return with result null and an error",
        {"op": "return", "call": 1, "result": None, "error": {"code": "x", "message": "y"}},
        id=None,
    )
    bad("return with a string error", {"op": "return", "call": 1, "error": "failed"}, id=None)
    bad("return with an error without code", {"op": "return", "call": 1, "error": {"message": "y"}}, id=None)
    bad("return with an error without message", {"op": "return", "call": 1, "error": {"code": "x"}}, id=None)
    bad("return with a numeric error code", {"op": "return", "call": 1, "error": {"code": 1, "message": "y"}}, id=None)
    bad("return with error message null", {"op": "return", "call": 1, "error": {"code": "x", "message": None}}, id=None)
    bad(
        "return with an unknown error field",
        {"op": "return", "call": 1, "error": {"code": "x", "message": "y", "data": 1}},
        id=None,
    )
    bad(
        "return with a duplicate error field",
        text='{"op":"return","call":1,"error":{"code":"x","code":"y","message":"z"}}',
        id=None,
    )
    bad("return with unknown field", {"op": "return", "call": 1, "result": 1, "handler": "h1"}, id=None)

    # -- Idempotency keys (once, protocol-v1.md section 3.8) --------------------------------
    # Each key is used once across all cases: a case that repeated one would get a repeat.
    case(
        "put with a key",
        {"op": "put", "id": 30, "slot": "vec-once-put", "value": {"n": 1}, "once": "vec-once-put-1"},
        result={"replaced": False, "delivered": False},
    )
    case(
        "put with once null",
        {"op": "put", "id": 30, "slot": "vec-once-null", "value": 1, "once": None},
        result={"replaced": False, "delivered": False},
    )
    case(
        "put of null into an unused slot with a key",
        {"op": "put", "id": 30, "slot": "vec-once-empty", "value": None, "once": "vec-once-empty-1"},
        result={"replaced": False, "delivered": False},
    )
    case(
        "take from an unused slot with a key records nothing",
        {"op": "take", "id": 31, "slot": "vec-once-unused", "once": "vec-once-take-1"},
        result=None,
    )
    case("setCategories with a key", dict(categories([]), once="vec-once-cats-1"), result={"count": 0})
    case(
        "a key of 256 bytes",
        {"op": "put", "id": 30, "slot": "vec-once-256", "value": 1, "once": "k" * 256},
        result={"replaced": False, "delivered": False},
    )
    bad("a key of 0 bytes", {"op": "put", "id": 30, "slot": "vec-once-bad", "value": 1, "once": ""})
    bad("a key of 257 bytes", {"op": "put", "id": 30, "slot": "vec-once-bad", "value": 1, "once": "k" * 257})
    bad("a numeric key", {"op": "post", "id": 30, "name": "vec-once", "once": 7})
    bad("a key that is an object", {"op": "take", "id": 31, "slot": "vec-once-bad", "once": {"k": 1}})
    bad("a key on ping", {"op": "ping", "id": 32, "once": "vec-once-ping"})
    bad("a key on invoke", {"op": "invoke", "id": 32, "channel": "vec-c", "method": "m", "once": "vec-once-invoke"})
    bad("a key on peek", {"op": "peek", "id": 32, "slot": "vec-once-bad", "once": "vec-once-peek"})
    bad("a key on subscribe", {"op": "subscribe", "id": 32, "events": ["e"], "once": "vec-once-sub"})
    bad("a key is checked after the op's own fields", {"op": "put", "id": 30, "slot": "", "value": 1, "once": 7})
    case(
        "a bad key after a bad profile payload",
        {"op": "post", "id": 30, "name": "willPresent", "once": 7},
        error="invalid_payload",
    )
    bad("a duplicate key", text='{"op":"put","id":30,"slot":"vec-once-dup","value":1,"once":"a","once":"b"}')

    # -- Framing errors on a live connection ----------------------------------------------
    case("zero-length frame", text="", id=None, error="frame_too_large", closes=True)
    case("zero-length frame before hello", text="", greeted=False, id=None, error="frame_too_large", closes=True)
    for name, body in [
        ("unterminated object", '{"op":"ping","id":1'),
        ("trailing garbage", '{"op":"ping","id":1}x'),
        ("top-level array", '[{"op":"ping","id":1}]'),
        ("top-level string", '"ping"'),
        ("top-level null", "null"),
        ("whitespace only", " "),
        ("leading zero", '{"op":"ping","id":01}'),
        ("bad escape", '{"op":"ping","id":"\\x"}'),
        ("control character in a string", '{"op":"ping","id":"a\tb"}'),
        ("NaN literal", '{"op":"post","id":1,"name":"n","payload":NaN}'),
        ("single quotes", "{'op':'ping','id':1}"),
    ]:
        case(f"bad JSON: {name}", text=body, id=None, error="bad_json")

    names = [c["name"] for c in CASES]
    assert len(names) == len(set(names)), [x for x in names if names.count(x) > 1]


def message_vectors() -> Dict[str, Any]:
    CASES.clear()
    build_cases()
    return {
        "description": (
            "Request/reply cases of notifbus protocol v1, each played on a fresh connection to "
            "a broker started with default flags and no --state-dir. When 'greeted' is true the "
            'connection first sends {"op":"hello","id":"h","protocol":1} and reads its '
            "reply. 'send' is a JSON object to encode compactly as UTF-8; 'sendText' is a body to "
            "send byte for byte (UTF-8), for bodies a JSON encoder cannot produce. The broker's "
            "next 'reply' frame must carry 'id' (compared by JSON type and value) and either "
            "exactly 'result' or an error whose code is 'error'. 'closes' says whether the broker "
            "then closes the connection; when false the connection stays usable (a greeted "
            "connection answers a ping; an ungreeted one still accepts hello). Slots, categories "
            "and keys are broker-wide: every case uses names no other case uses, the only "
            "setCategories that succeeds sets the empty set, and results are exact only where they "
            "do not depend on the order of cases. Generated by generate.py; edit that, not this file."
        ),
        "cases": list(CASES),
    }


# ---------------------------------------------------------------------------------------


def render(document: Dict[str, Any]) -> str:
    """Pretty at the top, one compact line per vector, so that a diff shows whole vectors.

    ensure_ascii keeps the files plain ASCII; a lone surrogate could not be written as UTF-8.
    """

    def compact(value: Any) -> str:
        return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(", ", ": "))

    lines = ["{"]
    keys = list(document)
    for i, key in enumerate(keys):
        value = document[key]
        end = "," if i < len(keys) - 1 else ""
        if isinstance(value, list):
            lines.append(f" {compact(key)}: [")
            for j, item in enumerate(value):
                lines.append("  " + compact(item) + ("," if j < len(value) - 1 else ""))
            lines.append(" ]" + end)
        else:
            lines.append(f" {compact(key)}: {compact(value)}{end}")
    lines.append("}")
    text = "\n".join(lines) + "\n"
    assert json.loads(text) == document
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare with the files on disk, write nothing")
    args = parser.parse_args()
    outputs = {
        HERE / "framing.json": render(framing_vectors()),
        HERE / "messages.json": render(message_vectors()),
    }
    stale = []
    for path, text in outputs.items():
        current = path.read_text(encoding="utf-8") if path.exists() else None
        if current == text:
            continue
        if args.check:
            stale.append(path.name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.name}")
    if stale:
        print("out of date: " + ", ".join(stale) + " (run generate.py)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
