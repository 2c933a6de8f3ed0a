#!/usr/bin/env python3
"""Checks that every Swift module imports and calls only what its layer allows.

The layers, as ARCHITECTURE.md ("The layers") describes them: NotifBusProtocol has no
sockets and no clock; NotifBusCore is a pure state machine with no system I/O at all;
NotifBusClient stands beside the broker's modules, never on them; each C library is
imported by the one module that wraps it (and by that module's own tests). Besides, a target imports only what
Package.swift declares it depends on (or what those dependencies re-export with
`@_exported`), plus the toolchain's modules.
It reads sources only (comments and string literals are skipped) and changes nothing.
Python 3 standard library only.

    python3 scripts/lib/layering.py [--root DIR] [--manifest FILE]
    python3 scripts/lib/layering.py --self-test

Without --manifest the package is described by `swift package dump-package` run in
--root. Exit status: 0 clean, 1 a rule is broken (each break printed as file:line), 2
the package could not be read.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Set, Tuple

HERE = Path(__file__).resolve().parent
FIXTURE = HERE / "layering-fixture"

# Modules every target may import without declaring them: the Swift toolchain's own.
TOOLCHAIN = {
    "Swift",
    "_Concurrency",
    "_StringProcessing",
    "RegexBuilder",
    "Synchronization",
    "Observation",
    "Distributed",
    "Glibc",
    "Musl",
    "Darwin",
    "Foundation",
    "FoundationEssentials",
    "FoundationInternationalization",
    "FoundationNetworking",
    "FoundationXML",
    "Dispatch",
    "Testing",
    "XCTest",
}

# Each C library, and the one target allowed to import it (and that target's own test
# target, `<name>Tests`, which drives it on the same layer).
ONLY_IMPORTER = {
    "CLibevent": "NotifBusTransport",
    "CSdBus": "notifbus-desktop",
    "CNats": "NotifBusNATS",
}

# Glibc calls by what they reach. A call counts when written `Glibc.name(` anywhere, or
# `name(` unqualified in a file that imports a system module and declares no function of
# that name itself (so a type's own `write(_:)` method is not taken for the syscall).
SOCKET_CALLS = {
    "socket",
    "socketpair",
    "connect",
    "bind",
    "listen",
    "accept",
    "accept4",
    "send",
    "sendto",
    "sendmsg",
    "recv",
    "recvfrom",
    "recvmsg",
    "shutdown",
    "getsockopt",
    "setsockopt",
    "getpeername",
    "getsockname",
}
IO_CALLS = {
    "read",
    "write",
    "readv",
    "writev",
    "pread",
    "pwrite",
    "open",
    "openat",
    "creat",
    "close",
    "fsync",
    "fdatasync",
    "poll",
    "ppoll",
    "select",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_wait",
    "fopen",
    "fdopen",
    "fread",
    "fwrite",
    "fclose",
    "fflush",
    "fcntl",
    "ioctl",
    "pipe",
    "pipe2",
    "dup",
    "dup2",
    "lseek",
    "ftruncate",
    "unlink",
    "rename",
    "mkdir",
    "rmdir",
    "fstat",
    "lstat",
    "stat",
}
CLOCK_CALLS = {
    "clock_gettime",
    "clock_nanosleep",
    "gettimeofday",
    "time",
    "nanosleep",
    "usleep",
    "sleep",
}
# Clocks reachable without any import (the standard library's) or through Foundation and
# Dispatch; a name here counts wherever it appears as an identifier.
CLOCK_NAMES = {
    "ContinuousClock",
    "SuspendingClock",
    "Date",
    "DispatchTime",
    "DispatchWallTime",
    "CFAbsoluteTimeGetCurrent",
}
SYSTEM_MODULES = {"Glibc", "Musl", "Darwin", "Foundation", "FoundationEssentials", "Dispatch"}


@dataclass(frozen=True)
class LayerRule:
    """What one module's layer must not use, and why (printed with each break)."""

    forbidden_imports: Dict[str, str]
    forbidden_calls: Dict[str, str]
    forbidden_names: Dict[str, str]


def _each(names: Iterable[str], why: str) -> Dict[str, str]:
    return {n: why for n in names}


NO_SOCKETS = "the protocol layer has no sockets (ARCHITECTURE.md: The layers)"
NO_CLOCK_PROTOCOL = "the protocol layer reads no clock (ARCHITECTURE.md: The layers)"
PURE_CORE = "the core is a pure state machine: no I/O, no clock, no event loop (ARCHITECTURE.md: The layers)"
CLIENT_BESIDE = "the client stands beside the broker's modules, never on them (ARCHITECTURE.md: The layers)"

LAYER_RULES: Dict[str, LayerRule] = {
    "NotifBusProtocol": LayerRule(
        forbidden_imports={
            **_each(["CLibevent", "CSdBus", "CNats", "FoundationNetworking"], NO_SOCKETS),
            **_each(
                ["Foundation", "FoundationEssentials", "Dispatch"],
                "the protocol layer has no sockets and no clock; Foundation and Dispatch bring both (ARCHITECTURE.md: The layers)",
            ),
            **_each(
                ["NotifBusCore", "NotifBusTransport", "NotifBusClient"],
                "the protocol layer is the bottom one (ARCHITECTURE.md: The layers)",
            ),
        },
        forbidden_calls={
            **_each(SOCKET_CALLS | (IO_CALLS - {"stat", "lstat", "fstat"}), NO_SOCKETS),
            **_each(CLOCK_CALLS, NO_CLOCK_PROTOCOL),
        },
        forbidden_names=_each(CLOCK_NAMES, NO_CLOCK_PROTOCOL),
    ),
    "NotifBusCore": LayerRule(
        forbidden_imports=_each(
            [
                "CLibevent",
                "CSdBus",
                "CNats",
                "Glibc",
                "Musl",
                "Darwin",
                "Foundation",
                "FoundationEssentials",
                "FoundationNetworking",
                "Dispatch",
                "NotifBusTransport",
                "NotifBusClient",
            ],
            PURE_CORE,
        ),
        forbidden_calls=_each(SOCKET_CALLS | IO_CALLS | CLOCK_CALLS, PURE_CORE),
        forbidden_names=_each(CLOCK_NAMES, PURE_CORE),
    ),
    "NotifBusClient": LayerRule(
        forbidden_imports=_each(["NotifBusCore", "NotifBusTransport", "CLibevent"], CLIENT_BESIDE),
        forbidden_calls={},
        forbidden_names={},
    ),
}


@dataclass
class Target:
    name: str
    kind: str
    folder: Path
    dependencies: List[str]
    exclude: List[str]


@dataclass
class Import:
    line: int
    module: str
    exported: bool


# ---------------------------------------------------------------------------------------
# Reading Swift: code with comments and string literals blanked out, line numbers kept.


def strip_swift(text: str) -> str:
    """The text with comments and string-literal contents replaced by spaces.

    Newlines stay, so line numbers are unchanged. Handles nested block comments,
    multi-line strings, raw strings (#"..."#) and interpolations (whose code is kept).
    """
    out: List[str] = []
    i, n = 0, len(text)
    # Each entry is an open string: (hashes, multiline, paren depth of the interpolation
    # it is inside, or -1 while in the literal part).
    strings: List[List[int]] = []

    def blank(s: str) -> str:
        return "".join(c if c == "\n" else " " for c in s)

    while i < n:
        if strings and strings[-1][2] < 0:
            hashes, multiline = strings[-1][0], strings[-1][1]
            close = ('"""' if multiline else '"') + "#" * hashes
            if text.startswith(close, i):
                out.append(close)
                i += len(close)
                strings.pop()
                continue
            escape = "\\" + "#" * hashes
            if text.startswith(escape + "(", i):
                out.append(" " * len(escape) + "(")
                i += len(escape) + 1
                strings[-1][2] = 0
                continue
            if text.startswith(escape, i) and i + len(escape) < n:
                out.append(blank(text[i : i + len(escape) + 1]))
                i += len(escape) + 1
                continue
            out.append("\n" if text[i] == "\n" else " ")
            i += 1
            continue
        c = text[i]
        if text.startswith("//", i):
            end = text.find("\n", i)
            end = n if end < 0 else end
            out.append(" " * (end - i))
            i = end
            continue
        if text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(blank(text[i:j]))
            i = j
            continue
        m = re.match(r'(#*)("""|")', text[i : i + 64])
        if m:
            out.append(m.group(0))
            i += len(m.group(0))
            strings.append([len(m.group(1)), 1 if m.group(2) == '"""' else 0, -1])
            continue
        if strings:  # code inside an interpolation
            if c == "(":
                strings[-1][2] += 1
            elif c == ")":
                if strings[-1][2] == 0:
                    strings[-1][2] = -1
                    out.append(")")
                    i += 1
                    continue
                strings[-1][2] -= 1
        out.append(c)
        i += 1
    return "".join(out)


IMPORT_RE = re.compile(
    r"^\s*((?:@\w+(?:\([^)]*\))?\s+)*)import\s+(?:(?:typealias|struct|class|enum|protocol|let|var|func)\s+)?([A-Za-z_]\w*)",
    re.MULTILINE,
)
CALL_RE = re.compile(r"(?<![\w.])(?:(Glibc|Musl|Darwin|Foundation)\s*\.\s*)?([A-Za-z_]\w*)\s*\(")
FUNC_RE = re.compile(r"\bfunc\s+([A-Za-z_]\w*)")
IDENT_RE = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\b")


def line_of(text: str, offset: int) -> int:
    return text.count("\n", 0, offset) + 1


def imports_of(code: str) -> List[Import]:
    return [Import(line_of(code, m.start(2)), m.group(2), "@_exported" in m.group(1)) for m in IMPORT_RE.finditer(code)]


# ---------------------------------------------------------------------------------------
# Reading the package.


def read_manifest(root: Path, manifest: Optional[Path]) -> dict:
    if manifest is not None:
        return json.loads(manifest.read_text(encoding="utf-8"))
    try:
        done = subprocess.run(
            ["swift", "package", "dump-package"], cwd=root, capture_output=True, text=True, timeout=300
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SystemExit(f"layering: could not run swift package dump-package: {exc}") from None
    if done.returncode != 0:
        raise SystemExit(f"layering: swift package dump-package failed:\n{done.stderr}")
    return json.loads(done.stdout)


def dependency_names(entry: dict) -> List[str]:
    """The module names of one dump-package dependency entry (byName, target or product)."""
    for key in ("byName", "target"):
        if key in entry:
            return [entry[key][0]]
    if "product" in entry:
        return [entry["product"][0]]
    return []


def targets_of(root: Path, manifest: dict) -> List[Target]:
    targets = []
    for t in manifest.get("targets", []):
        kind = t.get("type", "regular")
        default = ("Tests" if kind == "test" else "Sources") + "/" + t["name"]
        folder = root / (t.get("path") or default)
        dependencies = [name for entry in t.get("dependencies", []) for name in dependency_names(entry)]
        targets.append(Target(t["name"], kind, folder, dependencies, t.get("exclude", [])))
    return targets


def swift_files(target: Target) -> List[Path]:
    if not target.folder.is_dir():
        return []
    excluded = [target.folder / e for e in target.exclude]
    return sorted(p for p in target.folder.rglob("*.swift") if not any(p == e or e in p.parents for e in excluded))


def module_name(target: Target) -> str:
    """The name a Swift `import` uses: dashes become underscores."""
    return target.name.replace("-", "_")


# ---------------------------------------------------------------------------------------
# The check.


def check(root: Path, manifest: dict) -> List[str]:
    """Every broken rule as 'path:line: message', in file order."""
    targets = targets_of(root, manifest)
    by_module = {module_name(t): t for t in targets}
    by_name = {t.name: t for t in targets}
    code_of: Dict[Path, str] = {}
    imports: Dict[str, List[Tuple[Path, Import]]] = {}
    for t in targets:
        found = []
        for path in swift_files(t):
            code = strip_swift(path.read_text(encoding="utf-8"))
            code_of[path] = code
            found += [(path, imp) for imp in imports_of(code)]
        imports[t.name] = found

    def reexports(name: str, seen: Set[str]) -> Set[str]:
        """Modules that importing target `name` also makes visible through @_exported."""
        if name in seen or name not in by_name:
            return set()
        seen.add(name)
        out: Set[str] = set()
        for _, imp in imports[name]:
            if imp.exported:
                out.add(imp.module)
                if imp.module in by_module:
                    out |= reexports(by_module[imp.module].name, seen)
        return out

    problems: List[Tuple[str, int, str]] = []

    def report(path: Path, line: int, message: str) -> None:
        try:
            shown = str(path.relative_to(root))
        except ValueError:
            shown = str(path)
        problems.append((shown, line, message))

    for t in targets:
        if t.kind == "system":
            continue
        me = module_name(t)
        declared = set()
        for d in t.dependencies:
            declared.add(d.replace("-", "_"))
            declared |= reexports(d, set())
        rule = LAYER_RULES.get(t.name)
        for path, imp in imports[t.name]:
            if imp.module == me:
                continue
            if rule and imp.module in rule.forbidden_imports:
                report(path, imp.line, f"{t.name} imports {imp.module}: {rule.forbidden_imports[imp.module]}")
                continue
            owner = ONLY_IMPORTER.get(imp.module)
            if owner is not None and t.name not in (owner, owner + "Tests"):
                report(path, imp.line, f"{t.name} imports {imp.module}: only {owner} may import {imp.module}")
                continue
            if imp.module not in declared and imp.module not in TOOLCHAIN:
                report(
                    path,
                    imp.line,
                    f"{t.name} imports {imp.module}, which Package.swift does not list among "
                    f"its dependencies (nor does any of them re-export it)",
                )
        if rule is None:
            continue
        for path in swift_files(t):
            code = code_of[path]
            file_imports = {imp.module for p, imp in imports[t.name] if p == path}
            own_funcs = set(FUNC_RE.findall(code))
            unqualified_counts = bool(file_imports & SYSTEM_MODULES)
            for m in CALL_RE.finditer(code):
                qualifier, name = m.group(1), m.group(2)
                if name not in rule.forbidden_calls:
                    continue
                if qualifier is None and (not unqualified_counts or name in own_funcs):
                    continue
                shown = f"{qualifier}.{name}" if qualifier else name
                report(path, line_of(code, m.start(2)), f"{t.name} calls {shown}(): {rule.forbidden_calls[name]}")
            for m in IDENT_RE.finditer(code):
                if m.group(1) in rule.forbidden_names:
                    report(
                        path,
                        line_of(code, m.start(1)),
                        f"{t.name} uses {m.group(1)}: {rule.forbidden_names[m.group(1)]}",
                    )
    problems.sort()
    return [f"{p}:{line}: {message}" for p, line, message in problems]


# ---------------------------------------------------------------------------------------
# The self-test: a fixture package in which every rule is broken once, and a file whose
# comments and strings mention everything and must pass.


def self_test() -> int:
    expected = [
        line
        for line in (FIXTURE / "expected.txt").read_text(encoding="utf-8").splitlines()
        if line and not line.startswith("#")
    ]
    manifest = json.loads((FIXTURE / "manifest.json").read_text(encoding="utf-8"))
    got = check(FIXTURE, manifest)
    if got != expected:
        print("layering self-test FAILED: the fixture's breaks were not reported as expected")
        for line in sorted(set(expected) - set(got)):
            print(f"  missed:     {line}")
        for line in sorted(set(got) - set(expected)):
            print(f"  unexpected: {line}")
        return 1
    print(f"layering self-test: all {len(expected)} planted breaks found, nothing else")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description="Check the layering of the Swift modules.")
    parser.add_argument(
        "--root", type=Path, default=HERE.parent.parent, help="package folder (default: this repository)"
    )
    parser.add_argument(
        "--manifest",
        type=Path,
        default=None,
        help="a `swift package dump-package` JSON file (default: run it in --root)",
    )
    parser.add_argument("--self-test", action="store_true", help="check the planted fixture instead")
    args = parser.parse_args()
    if args.self_test:
        return self_test()
    root = args.root.resolve()
    try:
        manifest = read_manifest(root, args.manifest)
    except (OSError, ValueError) as exc:
        print(f"layering: could not read the package description: {exc}")
        return 2
    if not manifest.get("targets"):
        print("layering: the package description lists no targets")
        return 2
    problems = check(root, manifest)
    for p in problems:
        print(p)
    files = sum(len(swift_files(t)) for t in targets_of(root, manifest))
    if problems:
        print(f"layering: {len(problems)} break(s) of the layer rules (see ARCHITECTURE.md: The layers)")
        return 1
    print(f"layering: {files} Swift files in {len(manifest['targets'])} targets follow the layer rules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
