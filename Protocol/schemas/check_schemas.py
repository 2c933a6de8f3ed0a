#!/usr/bin/env python3
"""Checks the schemas against the 2020-12 metaschema and against the vectors.

- Every schema file is a valid draft 2020-12 schema.
- Every framing vector whose body has a client op validates against client-message.json,
  and every one with a broker op against broker-frame.json (the few deliberately odd
  frames are listed below).
- Every message case sent as a JSON object ("send") validates against
  client-message.json when the broker accepts its shape (a result, not_found,
  not_implemented, invalid_action, unsupported_protocol), and fails when the broker
  rejects the shape (bad_request, unknown_op, invalid_payload), except for the rules a
  schema cannot see, listed below. Exact results are checked against the result schemas.

Needs the `jsonschema` package (4.18 or later); the vectors themselves need nothing.
Run: python3 Protocol/schemas/check_schemas.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

try:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
except ImportError:  # pragma: no cover - depends on the machine
    print("check_schemas.py needs the jsonschema package (pip install jsonschema)")
    sys.exit(2)

SCHEMAS = Path(__file__).resolve().parent
VECTORS = SCHEMAS.parent / "vectors"

CLIENT_OPS = {
    "hello",
    "ping",
    "subscribe",
    "unsubscribe",
    "post",
    "handle",
    "unhandle",
    "invoke",
    "put",
    "take",
    "peek",
    "setCategories",
    "getCategories",
    "status",
    "monitor",
    "next",
    "complete",
    "stop",
    "return",
}
BROKER_OPS = {"reply", "event", "evicted", "call", "seen"}

#: Framing vectors that are valid frames but deliberately not valid messages.
FRAMES_NOT_MESSAGES = {"empty object"}

#: Message cases the broker rejects for a reason a schema cannot express.
SCHEMA_BLIND = {
    "second hello": "depends on the connection's state",
    "second hello with protocol 2 stays open": "depends on the connection's state",
    "string id of 258 bytes in two-byte characters": "the limit is in bytes, maxLength counts code points",
    "duplicate category identifiers": "uniqueness of one member across array items",
    "duplicate action identifiers": "uniqueness of one member across array items",
}

#: The schema of each op's result, for cases that expect an exact result.
RESULT_SCHEMAS = {
    "ping": "result-empty.json",
    "monitor": "result-empty.json",
    "put": "result-put.json",
    "setCategories": "result-setCategories.json",
    "getCategories": "result-getCategories.json",
}

ACCEPTED = {"not_found", "not_implemented", "invalid_action", "unsupported_protocol"}
REJECTED = {"bad_request", "unknown_op", "invalid_payload"}


def main() -> int:
    resources = []
    problems = []
    for path in sorted(SCHEMAS.glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        try:
            Draft202012Validator.check_schema(schema)
        except Exception as exc:  # the error type varies between jsonschema versions
            problems.append(f"{path.name}: not a valid 2020-12 schema: {exc}")
        resources.append((schema["$id"], Resource.from_contents(schema)))
    registry = Registry().with_resources(resources)
    base = json.loads((SCHEMAS / "common.json").read_text(encoding="utf-8"))["$id"].rsplit("/", 1)[0] + "/"

    def validator(name: str) -> Draft202012Validator:
        return Draft202012Validator({"$ref": base + name}, registry=registry)

    client, broker = validator("client-message.json"), validator("broker-frame.json")
    checked = 0

    framing = json.loads((VECTORS / "framing.json").read_text(encoding="utf-8"))
    for vector in framing["valid"]:
        body, name = vector["json"], vector["name"]
        if name in FRAMES_NOT_MESSAGES:
            continue
        which = client if body.get("op") in CLIENT_OPS else broker if body.get("op") in BROKER_OPS else None
        if which is None:
            problems.append(f"framing '{name}': op {body.get('op')!r} is neither a client nor a broker op")
            continue
        errors = list(which.iter_errors(body))
        checked += 1
        if errors:
            problems.append(f"framing '{name}': {errors[0].message}")

    messages = json.loads((VECTORS / "messages.json").read_text(encoding="utf-8"))
    for case in messages["cases"]:
        if "send" not in case:
            continue
        name, expect = case["name"], case["expect"]
        valid = client.is_valid(case["send"])
        checked += 1
        if "result" in expect or expect.get("error") in ACCEPTED:
            if not valid:
                problems.append(
                    f"message '{name}': the broker accepts it but the schema does not: "
                    f"{next(client.iter_errors(case['send'])).message}"
                )
            op = case["send"].get("op")
            if "result" in expect and op in RESULT_SCHEMAS:
                errors = list(validator(RESULT_SCHEMAS[op]).iter_errors(expect["result"]))
                if errors:
                    problems.append(
                        f"message '{name}': result does not match {RESULT_SCHEMAS[op]}: {errors[0].message}"
                    )
        elif expect.get("error") in REJECTED and valid and name not in SCHEMA_BLIND:
            problems.append(f"message '{name}': the broker answers {expect['error']} but the schema accepts it")

    for problem in problems:
        print(problem)
    print(f"{checked - len(problems)} passed, {len(problems)} failed")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
