#!/usr/bin/env python3
"""Writes the broker's error table, Protocol/errors.json, into the Python and JavaScript
clients, so that an installed package (which cannot read Protocol/) carries it.
It only renders the table; it must not decide anything the table does not say.

    python3 Clients/generate_error_table.py           # rewrite both generated files
    python3 Clients/generate_error_table.py --check   # exit 1 if either is out of date
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parents[1]
TABLE = ROOT / "Protocol" / "errors.json"
PYTHON_FILE = ROOT / "Clients" / "python" / "src" / "notifbus" / "_error_table.py"
JS_FILE = ROOT / "Clients" / "js" / "src" / "errorTable.js"


#: The opening lines of both generated files: what they are and that they are not edited.
HEADER = (
    "The error codes the broker itself sends, and which of them close the connection.",
    "Generated from Protocol/errors.json by Clients/generate_error_table.py: edit that table",
    "and run the script, never this file. It holds data only; the client decides with it.",
)


class TableError(Exception):
    """Protocol/errors.json is not a well-formed table."""


def load_table(path: Path = TABLE) -> List[Dict[str, Any]]:
    """The table's entries in file order, each checked: a unique non-empty `code`, the
    booleans `contract` and `closes`, and a one-line `meaning`."""
    root = json.loads(path.read_text(encoding="utf-8"))
    entries = root.get("codes") if isinstance(root, dict) else None
    if not isinstance(entries, list) or not entries:
        raise TableError(f"{path}: 'codes' must be a non-empty list")
    seen = set()
    for index, entry in enumerate(entries):
        where = f"{path}: codes[{index}]"
        if not isinstance(entry, dict) or set(entry) != {"code", "contract", "closes", "meaning"}:
            raise TableError(f"{where}: members must be exactly code, contract, closes, meaning")
        code, meaning = entry["code"], entry["meaning"]
        if not isinstance(code, str) or not code or not code.isascii():
            raise TableError(f"{where}: code must be a non-empty ASCII string")
        if code in seen:
            raise TableError(f"{where}: code {code!r} is listed twice")
        seen.add(code)
        if not isinstance(entry["contract"], bool) or not isinstance(entry["closes"], bool):
            raise TableError(f"{where}: contract and closes must be booleans")
        if not isinstance(meaning, str) or not meaning or "\n" in meaning:
            raise TableError(f"{where}: meaning must be one non-empty line")
    return entries


def render_python(entries: List[Dict[str, Any]]) -> str:
    """The text of the Python client's `_error_table.py`."""
    lines = [
        f'"""{HEADER[0]}',
        "",
        *HEADER[1:],
        '"""',
        "",
        "from typing import Dict, FrozenSet, NamedTuple",
        "",
        "",
        "class ErrorCodeInfo(NamedTuple):",
        '    """One row of the table."""',
        "",
        "    #: The broker closes the connection after sending this error.",
        "    closes: bool",
        "    #: The code is in the contract's list (protocol v1, section 4), not one the project adds.",
        "    contract: bool",
        "    #: What the error means, in one line.",
        "    meaning: str",
        "",
        "",
        "#: Every code the broker sends, in the table's order.",
        "ERROR_CODES: Dict[str, ErrorCodeInfo] = {",
    ]
    for entry in entries:
        lines.append(
            f"    {json.dumps(entry['code'])}: ErrorCodeInfo("
            f"closes={entry['closes']}, contract={entry['contract']}, meaning={json.dumps(entry['meaning'])}),"
        )
    lines += [
        "}",
        "",
        "#: The codes after which the broker closes the connection.",
        "CLOSING_CODES: FrozenSet[str] = frozenset(code for code, info in ERROR_CODES.items() if info.closes)",
        "",
    ]
    return "\n".join(lines)


def render_javascript(entries: List[Dict[str, Any]]) -> str:
    """The text of the JavaScript client's `errorTable.js`."""
    lines = [
        *(f"// {line}" for line in HEADER),
        "",
        "/**",
        " * Every code the broker sends, in the table's order: whether the broker closes the",
        " * connection after it, whether it is in the contract's list (protocol v1, section 4)",
        " * rather than one the project adds, and what it means.",
        " * @type {Readonly<Record<string, Readonly<{closes: boolean, contract: boolean, meaning: string}>>>}",
        " */",
        "export const ERROR_CODES = Object.freeze({",
    ]
    for entry in entries:
        lines.append(
            f"  {json.dumps(entry['code'])}: Object.freeze({{ closes: {json.dumps(entry['closes'])}, "
            f"contract: {json.dumps(entry['contract'])}, meaning: {json.dumps(entry['meaning'])} }}),"
        )
    lines += [
        "});",
        "",
        "/** The codes after which the broker closes the connection. @type {ReadonlySet<string>} */",
        "export const CLOSING_CODES = new Set(Object.keys(ERROR_CODES).filter((code) => ERROR_CODES[code].closes));",
        "",
    ]
    return "\n".join(lines)


def outputs(entries: List[Dict[str, Any]]) -> Dict[Path, str]:
    """Each generated file with the text it must hold."""
    return {PYTHON_FILE: render_python(entries), JS_FILE: render_javascript(entries)}


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a generated file is out of date")
    args = parser.parse_args(argv)
    try:
        wanted = outputs(load_table())
    except (TableError, ValueError) as error:
        print(f"generate_error_table: {error}", file=sys.stderr)
        return 1
    stale = [path for path, text in wanted.items() if not path.exists() or path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(
                f"generate_error_table: {path.relative_to(ROOT)} is out of date; run {Path(__file__).relative_to(ROOT)}",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path in stale:
        path.write_text(wanted[path], encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
