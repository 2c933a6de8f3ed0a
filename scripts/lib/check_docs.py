#!/usr/bin/env python3
"""Runs every fenced code block of the three READMEs as a reader would: shell blocks in a
fresh home with the built notifbus on PATH, Swift blocks as a fresh package depending on
the product NotifBusClient alone, Python and JavaScript blocks against a live broker.

A block is skipped only when the line before it says `<!-- docs-test: skip (reason) -->`,
or when it is the top README's first block (its own entry points: demo and test suite).
Fences without a language hold drawings and listings, not code.
`<!-- docs-test: install -->` marks the install block, run with the debug build already
made (NOTIFBUS_BUILD_DIR) instead of a release build. It changes nothing in the checkout.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READMES = ["README.md", "Clients/python/README.md", "Clients/js/README.md"]
FENCE = re.compile(r"^```(\w*)\s*$")
MARKER = re.compile(r"^<!-- docs-test: (\w+)(?: \((.*)\))? -->$")
#: Bound on one block (the Swift package build is the longest).
BLOCK_LIMIT = 240


class Block:
    def __init__(self, file: str, line: int, lang: str, text: str, marker: str | None, reason: str | None):
        self.file, self.line, self.lang, self.text, self.marker, self.reason = file, line, lang, text, marker, reason

    def __str__(self) -> str:
        return f"{self.file}:{self.line} ({self.lang or 'text'})"


def blocks(file: str) -> list[Block]:
    lines = (ROOT / file).read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start = i
        i += 1
        body = []
        while i < len(lines) and lines[i] != "```":
            body.append(lines[i])
            i += 1
        i += 1
        marker = MARKER.match(lines[start - 1]) if start > 0 else None
        found.append(
            Block(
                file,
                start + 1,
                m.group(1),
                "\n".join(body) + "\n",
                marker.group(1) if marker else None,
                marker.group(2) if marker else None,
            )
        )
    return found


def stopped_from_outside(signum: int, _frame: object) -> None:
    """SIGTERM (the step's `timeout`) or SIGINT: unwind, so that the `finally` clauses end
    the running block's process group and the broker, and remove the temporary folder."""
    raise SystemExit(128 + signum)


def run(what: Block, command: list[str], env: dict, cwd: Path, stdin: str | None = None) -> str:
    """Runs `command` in its own process group (background jobs included), bounded."""
    process = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = process.communicate(stdin, timeout=BLOCK_LIMIT)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, _ = process.communicate()
        fail(what, f"ran longer than {BLOCK_LIMIT} s", out)
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if process.returncode != 0:
        fail(what, f"exited with status {process.returncode}", out)
    return out


def fail(what: Block, why: str, output: str) -> None:
    print(f"docs: {what} {why}:\n{what.text}\n--- output ---\n{output}", file=sys.stderr)
    sys.exit(1)


class Broker:
    """A broker for the client blocks, on a socket in `folder`."""

    def __init__(self, binary: Path, folder: Path):
        self.socket = str(folder / "bus.sock")
        self.process = subprocess.Popen(
            [str(binary), "broker", "--socket", self.socket, "--hop-timeout", "2s"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            subprocess.run(
                [str(binary), "ping", "--wait", "10s", "--socket", self.socket],
                check=True,
                stdout=subprocess.DEVNULL,
                timeout=30,
            )
        except BaseException:
            self.stop()  # a broker that never answered is not left running
            raise

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(5)
        except subprocess.TimeoutExpired:
            self.process.kill()


def check_installed(block: Block, prefix: Path) -> None:
    """The install block put everything the Getting started section promises in place."""
    wanted = [
        "bin/notifbus",
        "bin/notifbus-desktop",
        "bin/notifbus-bridge",
        "share/man/man1/notifbus.1",
        "share/bash-completion/completions/notifbus",
        "share/zsh/site-functions/_notifbus",
        "share/fish/vendor_completions.d/notifbus.fish",
        "share/systemd/user/notifbus.socket",
        "share/systemd/user/notifbus.service",
        "share/systemd/user/notifbus-desktop.service",
    ]
    missing = [path for path in wanted if not (prefix / path).is_file()]
    if missing:
        fail(block, f"did not install {', '.join(missing)}", "")
    for unit, command in [("notifbus.service", "broker"), ("notifbus-desktop.service", "desktop")]:
        service = (prefix / "share/systemd/user" / unit).read_text()
        if f"ExecStart={prefix}/bin/notifbus {command}" not in service:
            fail(block, f"installed a {unit} that does not run the installed binary", service)
    if "WantedBy=graphical-session.target" not in (prefix / "share/systemd/user/notifbus-desktop.service").read_text():
        fail(block, "installed a notifbus-desktop.service that the graphical session does not start", "")
    page = (prefix / "share/man/man1/notifbus.1").read_text()
    if not page.startswith(".TH NOTIFBUS 1"):
        fail(block, "installed a man page that is not one", "")
    # The bridges' sections come from their own help, read beside the installed notifbus.
    for section, option in [("desktop", "\\-\\-app\\-name"), ("bridge", "\\-\\-device")]:
        if f".SS {section}\n" not in page or option not in page:
            fail(block, f"installed a man page without the {section} bridge's options", "")
    completion = (prefix / "share/bash-completion/completions/notifbus").read_text()
    if "--app-name" not in completion or "--device" not in completion:
        fail(block, "installed a bash completion without the bridges' options", "")


def check_without_broker(block: Block, program: Path, env: dict) -> None:
    """The program, run where no broker listens, says so in one line and exits 1: the error
    handling a real program has, not a crash with a backtrace."""
    done = subprocess.run(
        [str(program)], env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=BLOCK_LIMIT
    )
    lines = (done.stdout + done.stderr).splitlines()
    if done.returncode != 1 or len(lines) != 1 or "cannot connect" not in lines[0]:
        fail(
            block,
            f"without a broker exited {done.returncode}, not 1 with one line naming the failure",
            done.stdout + done.stderr,
        )


#: Where each README states its durations, once, near the top: (file, words, line limit).
DURATIONS = [
    ("README.md", "Durations are Swift `Duration`s", None),
    ("Clients/python/README.md", "Durations are **seconds**", 15),
    ("Clients/js/README.md", "Durations are **milliseconds**", 15),
]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def check_prose() -> None:
    """Relative links resolve (Protocol/ included: it must stand alone), and each client's
    README says how it takes durations before any example."""
    problems = []
    for file in READMES + [str(p.relative_to(ROOT)) for p in sorted((ROOT / "Protocol").glob("*.md"))]:
        text = (ROOT / file).read_text()
        for target in LINK.findall(text):
            if "://" in target:
                continue
            if not (ROOT / file).parent.joinpath(target).exists():
                problems.append(f"{file}: link to {target} leads nowhere")
        if file.startswith("Protocol/") and "shared specification" in text:
            problems.append(f"{file}: refers to a specification outside Protocol/")
    for file, words, limit in DURATIONS:
        lines = (ROOT / file).read_text().splitlines()
        where = [i for i, line in enumerate(lines) if words in line]
        if len(where) != 1 or (limit is not None and where[0] >= limit):
            problems.append(f"{file}: '{words}' should appear once, near the top")
    package = json.loads((ROOT / "Clients/js/package.json").read_text())
    if package.get("license") != "MIT" or package.get("type") != "module":
        problems.append('Clients/js/package.json: needs "license": "MIT" and "type": "module"')
    if 'license = { text = "MIT" }' not in (ROOT / "Clients/python/pyproject.toml").read_text():
        problems.append("Clients/python/pyproject.toml: needs its license")
    if not (ROOT / "LICENSE").is_file():
        problems.append("LICENSE is missing")
    if problems:
        print("docs: " + "\ndocs: ".join(problems), file=sys.stderr)
        sys.exit(1)
    print("docs: ok links, Protocol/ stands alone, each README states its durations, licenses in place")


def main() -> int:
    signal.signal(signal.SIGTERM, stopped_from_outside)
    signal.signal(signal.SIGINT, stopped_from_outside)
    check_prose()
    binary_dir = Path(os.environ.get("NOTIFBUS_BUILD_DIR", ROOT / ".build" / "debug"))
    binary = binary_dir / "notifbus"
    if not binary.is_file():
        print(f"docs: {binary} missing: run swift build first", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="nbdocs-", dir="/tmp"))
    broker = None
    try:
        home = work / "home"
        runtime = work / "run"
        home.mkdir()
        runtime.mkdir(mode=0o700)
        base_env = {k: v for k, v in os.environ.items() if not k.startswith("NOTIFBUS_")}
        shell_env = dict(
            base_env,
            HOME=str(home),
            XDG_RUNTIME_DIR=str(runtime),
            NOTIFBUS_BUILD_DIR=str(binary_dir),
            PATH=f"{home}/.local/bin:{base_env.get('PATH', '/usr/bin:/bin')}",
        )
        broker = Broker(binary, work)
        client_env = dict(base_env, NOTIFBUS_SOCKET=broker.socket, PYTHONPATH=str(ROOT / "Clients/python/src"))
        counts = {"ran": 0, "skipped": 0}
        swift_blocks: list[Block] = []
        js_project = None
        for file in READMES:
            for i, block in enumerate(blocks(file)):
                if block.marker == "skip" or (file == "README.md" and i == 0):
                    print(f"docs: skip {block}: {block.reason or 'the README entry points (demo, whole test suite)'}")
                    counts["skipped"] += 1
                    continue
                if block.lang == "":
                    continue  # a drawing or a layout listing, not code
                if block.lang == "sh":
                    if block.marker != "install" and not shutil.which("notifbus", path=shell_env["PATH"]):
                        fail(block, "runs before anything installed notifbus", "")
                    # The blocks that use the default socket get the shell's own; a
                    # README block is meant to be pasted as a whole.
                    run(block, ["bash", "-euo", "pipefail", "-c", block.text], shell_env, ROOT)
                    if block.marker == "install":
                        check_installed(block, home / ".local")
                elif block.lang == "swift":
                    swift_blocks.append(block)
                    continue
                elif block.lang == "python":
                    run(block, [sys.executable, "-"], client_env, work, stdin=block.text)
                elif block.lang == "js":
                    if js_project is None:
                        js_project = work / "js-app"
                        js_project.mkdir()
                        (js_project / "package.json").write_text(
                            json.dumps({"name": "docs-app", "private": True, "type": "module"})
                        )
                        if shutil.which("npm"):
                            run(
                                block,
                                ["npm", "install", "--offline", "--no-audit", "--no-fund", str(ROOT / "Clients/js")],
                                base_env,
                                js_project,
                            )
                        else:
                            # What `npm install FOLDER` makes: a link in node_modules.
                            (js_project / "node_modules").mkdir()
                            os.symlink(ROOT / "Clients/js", js_project / "node_modules" / "notifbus")
                    script = js_project / f"block{block.line}.js"
                    script.write_text(block.text)
                    run(block, ["node", script.name], client_env, js_project)
                else:
                    fail(block, f"has a language ('{block.lang}') this test cannot run; mark it skip with a reason", "")
                print(f"docs: ok {block}")
                counts["ran"] += 1
        manifests = [b for b in swift_blocks if "swift-tools-version" in b.text]
        programs = [b for b in swift_blocks if b not in manifests]
        if len(manifests) != 1 or len(programs) != 1:
            print(
                f"docs: expected one Package.swift and one program among the Swift blocks, found {len(swift_blocks)} blocks",
                file=sys.stderr,
            )
            return 1
        manifest, program = manifests[0], programs[0]
        name = re.search(r'name:\s*"([^"]+)"', manifest.text).group(1)
        package = work / "swift" / name
        (package / "Sources" / name).mkdir(parents=True)
        os.symlink(ROOT, work / "swift" / "notifbus")
        (package / "Package.swift").write_text(manifest.text)
        (package / "Sources" / name / "main.swift").write_text(program.text)
        run(program, ["swift", "build"], base_env, package)
        run(program, [str(package / ".build" / "debug" / name)], client_env, package)
        check_without_broker(
            program, package / ".build" / "debug" / name, dict(client_env, NOTIFBUS_SOCKET=str(work / "none.sock"))
        )
        print(f"docs: ok {manifest} and {program}: a fresh package on NotifBusClient alone builds and runs")
        counts["ran"] += 2
        print(f"docs: {counts['ran']} blocks ran, {counts['skipped']} skipped")
        return 0
    finally:
        if broker is not None:
            broker.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
