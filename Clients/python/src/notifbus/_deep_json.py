"""JSON of any nesting depth, for the values the standard ``json`` module cannot take.

``json.loads`` and ``json.dumps`` recurse once per level of nesting and raise
``RecursionError`` near a thousand levels. The broker forwards user data of any depth
that fits ``maxFrame`` (a 1 MiB frame can nest half a million levels), so the frame
codec falls back to these when the standard module gives up. They keep their own stack
of open containers instead of the call stack, and use the standard module's own pieces
for everything but nesting: its string scanner and escaper, its number pattern, Python's
``int``, ``float`` and ``float.__repr__``. They read and write what ``json.loads`` and
``json.dumps(..., separators=(",", ":"), allow_nan=False)`` do.
"""

from __future__ import annotations

import re
from json.decoder import JSONDecodeError, scanstring
from json.encoder import encode_basestring, encode_basestring_ascii
from json.scanner import NUMBER_RE
from typing import Any, Callable, List

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_LITERALS = (("null", None), ("true", True), ("false", False))


def _skip(text: str, at: int) -> int:
    return _WHITESPACE.match(text, at).end()  # type: ignore[union-attr]


def _key(text: str, at: int) -> "tuple[str, int]":
    """An object's member name and the index after its colon (and the blanks after it)."""
    if not text.startswith('"', at):
        raise JSONDecodeError("Expecting property name enclosed in double quotes", text, at)
    key, at = scanstring(text, at + 1, True)
    at = _skip(text, at)
    if not text.startswith(":", at):
        raise JSONDecodeError("Expecting ':' delimiter", text, at)
    return key, _skip(text, at + 1)


def loads(text: str) -> Any:
    """Parses one JSON value of any depth, as ``json.loads`` does (NaN and Infinity
    refused); raises ``json.JSONDecodeError`` (a ``ValueError``)."""
    # Open containers, innermost last: a list, or a dict with the key its next value takes.
    stack: List[List[Any]] = []
    at = _skip(text, 0)
    while True:
        # One value at `at`: a container opens (and the loop reads its first value), or a
        # scalar or an empty container is read whole.
        char = text[at : at + 1]
        if char == "[" or char == "{":
            at = _skip(text, at + 1)
            if text.startswith("]" if char == "[" else "}", at):
                value: Any = [] if char == "[" else {}
                at += 1
            elif char == "[":
                stack.append([[], None])
                continue
            else:
                key, at = _key(text, at)
                stack.append([{}, key])
                continue
        elif char == '"':
            value, at = scanstring(text, at + 1, True)
        else:
            for word, literal in _LITERALS:
                if text.startswith(word, at):
                    value, at = literal, at + len(word)
                    break
            else:
                match = NUMBER_RE.match(text, at)
                if match is None:
                    raise JSONDecodeError("Expecting value", text, at)
                integer, fraction, exponent = match.groups()
                value = float(match.group()) if fraction or exponent else int(integer)
                at = match.end()
        # The value goes into the innermost open container; each container it closes goes
        # into the one around it.
        while True:
            at = _skip(text, at)
            if not stack:
                if at != len(text):
                    raise JSONDecodeError("Extra data", text, at)
                return value
            top = stack[-1]
            container = top[0]
            if isinstance(container, list):
                container.append(value)
            else:
                container[top[1]] = value
            if text.startswith(",", at):
                at = _skip(text, at + 1)
                if isinstance(container, dict):
                    top[1], at = _key(text, at)
                break
            closer = "]" if isinstance(container, list) else "}"
            if not text.startswith(closer, at):
                raise JSONDecodeError(f"Expecting ',' delimiter or '{closer}'", text, at)
            at += 1
            stack.pop()
            value = container


def _member_name(key: Any) -> str:
    """A dict key as ``json.dumps`` writes it: strings as they are, and the scalars it
    turns into names."""
    if isinstance(key, str):
        return key
    if key is True:
        return "true"
    if key is False:
        return "false"
    if key is None:
        return "null"
    if isinstance(key, int):
        return int.__repr__(key)
    if isinstance(key, float):
        return _float(key)
    raise TypeError(f"keys must be str, int, float, bool or None, not {type(key).__name__}")


def _float(value: float) -> str:
    if value != value or value in (float("inf"), float("-inf")):
        raise ValueError(f"Out of range float values are not JSON compliant: {value!r}")
    return float.__repr__(value)


def dumps(value: Any, ensure_ascii: bool = False) -> str:
    """Writes one value of any depth as ``json.dumps(value, separators=(",", ":"),
    allow_nan=False, ensure_ascii=...)`` does; raises ``TypeError`` for what JSON cannot
    hold, ``ValueError`` for NaN, infinities and a container that holds itself."""
    string: Callable[[str], str] = encode_basestring_ascii if ensure_ascii else encode_basestring
    out: List[str] = []
    # Containers being written, innermost last: [container, its items left, is a dict, has
    # written an item]. `open_ids` finds one that holds itself, as json.dumps's
    # check_circular does.
    stack: List[List[Any]] = []
    open_ids: set = set()
    pending: Any = value
    while True:
        if pending is not _DONE:
            v = pending
            if isinstance(v, str):
                out.append(string(v))
            elif v is None:
                out.append("null")
            elif v is True:
                out.append("true")
            elif v is False:
                out.append("false")
            elif isinstance(v, int):
                out.append(int.__repr__(v))
            elif isinstance(v, float):
                out.append(_float(v))
            elif isinstance(v, (list, tuple, dict)):
                if id(v) in open_ids:
                    raise ValueError("Circular reference detected")
                open_ids.add(id(v))
                is_dict = isinstance(v, dict)
                out.append("{" if is_dict else "[")
                stack.append([v, iter(v.items()) if is_dict else iter(v), is_dict, False])
            else:
                raise TypeError(f"Object of type {type(v).__name__} is not JSON serializable")
        if not stack:
            return "".join(out)
        top = stack[-1]
        item = next(top[1], _DONE)
        if item is _DONE:
            stack.pop()
            open_ids.discard(id(top[0]))
            out.append("}" if top[2] else "]")
            pending = _DONE
            continue
        if top[3]:
            out.append(",")
        top[3] = True
        if top[2]:
            out.append(string(_member_name(item[0])) + ":")
            pending = item[1]
        else:
            pending = item


#: The end of a container's items, and "no value to write" (no user value is this object).
_DONE = object()
