"""The error table: the client's generated copy is current with Protocol/errors.json, the
session closes on exactly the table's closing codes, and the table agrees with the
contract (protocol-v1.md sections 3 and 4), with PROTOCOL.md section 11 and with the
schemas' list of broker error codes. No broker."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from typing import Dict, List, Set

import pytest

from notifbus import BrokerError
from notifbus._error_table import CLOSING_CODES, ERROR_CODES
from notifbus._reconnect import SUPERSEDED
from notifbus._session import Session

ROOT = Path(__file__).resolve().parents[3]
TABLE = json.loads((ROOT / "Protocol" / "errors.json").read_text(encoding="utf-8"))["codes"]


def load_generator():
    spec = importlib.util.spec_from_file_location("generate_error_table", ROOT / "Clients" / "generate_error_table.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_generated_files_are_current():
    generator = load_generator()
    for path, text in generator.outputs(generator.load_table()).items():
        assert path.read_text(encoding="utf-8") == text, f"{path} is out of date: run Clients/generate_error_table.py"


def test_generated_table_is_the_json_table():
    assert list(ERROR_CODES) == [entry["code"] for entry in TABLE]
    for entry in TABLE:
        info = ERROR_CODES[entry["code"]]
        assert (info.closes, info.contract, info.meaning) == (entry["closes"], entry["contract"], entry["meaning"])
    assert CLOSING_CODES == {entry["code"] for entry in TABLE if entry["closes"]}
    assert SUPERSEDED in ERROR_CODES


def test_generator_refuses_a_malformed_table(tmp_path):
    generator = load_generator()
    cases: List[Dict[str, object]] = [
        {"codes": []},
        {"codes": [{"code": "x", "contract": True, "closes": "yes", "meaning": "m"}]},
        {"codes": [{"code": "x", "contract": True, "closes": False, "meaning": "m", "extra": 1}]},
        {"codes": [{"code": "x", "contract": True, "closes": False, "meaning": "m"}] * 2},
        {"codes": [{"code": "x", "contract": True, "closes": False, "meaning": "two\nlines"}]},
    ]
    for case in cases:
        path = tmp_path / "errors.json"
        path.write_text(json.dumps(case), encoding="utf-8")
        with pytest.raises(generator.TableError):
            generator.load_table(path)


def contract_section(number: int) -> str:
    text = (ROOT / "Protocol" / "protocol-v1.md").read_text(encoding="utf-8")
    match = re.search(rf"^## {number}\. .*?(?=^## )", text, re.S | re.M)
    assert match, f"protocol-v1.md has no section {number}"
    return match.group(0)


def codes_in(text: str) -> Set[str]:
    return set(re.findall(r"`([a-z_]+)`", text))


def test_contract_codes_are_section_4s_list():
    assert {e["code"] for e in TABLE if e["contract"]} == codes_in(contract_section(4).split("Handlers may")[0])


def test_contract_closing_codes_are_section_3s_list():
    sentence = re.search(r"Only (.*?) close the connection", contract_section(3), re.S)
    assert sentence, "protocol-v1.md section 3 no longer names the closing codes"
    assert {e["code"] for e in TABLE if e["contract"] and e["closes"]} == codes_in(sentence.group(1))


def test_protocol_md_section_11_lists_every_code_with_its_closing():
    text = (ROOT / "Protocol" / "PROTOCOL.md").read_text(encoding="utf-8")
    section = re.search(r"^## 11\. Error codes\n(.*?)(?=^## )", text, re.S | re.M)
    assert section
    rows = dict(re.findall(r"^\| `([a-z_]+)` \|.*\| (yes|no)[^|]*\|$", section.group(1), re.M))
    assert rows == {e["code"]: "yes" if e["closes"] else "no" for e in TABLE}


def test_the_schemas_broker_error_codes_are_the_table():
    common = json.loads((ROOT / "Protocol" / "schemas" / "common.json").read_text(encoding="utf-8"))
    assert common["$defs"]["brokerErrorCode"]["enum"] == [entry["code"] for entry in TABLE]


@pytest.mark.parametrize("entry", TABLE, ids=[e["code"] for e in TABLE])
def test_session_keeps_a_closing_error_as_the_close_reason(entry):
    session = Session()
    frame = {"op": "reply", "id": None, "error": {"code": entry["code"], "message": "m"}}
    session.receive(frame)
    reason = session.close_reason
    if entry["closes"]:
        assert isinstance(reason, BrokerError) and reason.code == entry["code"]
    else:
        assert reason is None
