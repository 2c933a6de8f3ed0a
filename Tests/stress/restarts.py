#!/usr/bin/env python3
"""Chaos for clients that outlive the broker: observers and handlers in Python, JavaScript
and Swift (the CLI's observe and handle), a poster and invoker running all the time, and
20 broker restarts alternating SIGTERM and SIGKILL.

After each restart it checks, through `status`, that every live observer is there exactly
once (no duplicate), that every key is held by its latest owner (one key was taken over
before the chaos, and the evicted owner must not win it back), and at the end that every
request the poster made was answered exactly once: a result, or connection lost.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections import Counter
from typing import Dict, List, Tuple

import stresslib as sl

PY_CLIENT = str(sl.REPO_ROOT / "Clients" / "python" / "src")
JS_CLIENT = (sl.REPO_ROOT / "Clients" / "js" / "src" / "index.js").as_uri()

#: Longest the registrations may take to be back after the broker is ready.
BACK_LIMIT = 15.0

PY_WORKER = r"""
import sys, time, notifbus
name, socket, role = sys.argv[1], sys.argv[2], sys.argv[3]
bus = notifbus.connect(socket, name=name, timeout=10)
if role == "first-holder":
    bus.add_observer("e", lambda ev: notifbus.NEXT, priority=5, key="shared")
else:
    bus.add_observer("e", lambda ev: notifbus.NEXT, priority=10, key=name + "-k")
    bus.add_observer(["e", "f"], lambda ev: notifbus.NEXT, priority=20)
    bus.method_channel(name + "-ch").set_method_call_handler(lambda m, a: a, "m")
    if role == "taker":
        bus.add_observer("e", lambda ev: notifbus.NEXT, priority=5, key="shared")
print("ready", flush=True)
while True:
    time.sleep(1)
"""

JS_WORKER = r"""
const { connect, NEXT } = await import(process.argv[1]);
const [name, socket] = process.argv.slice(2);
const bus = await connect({ socket, name, timeout: 10000 });
await bus.addObserver('e', () => NEXT, { priority: 10, key: name + '-k' });
await bus.addObserver(['e', 'f'], () => NEXT, { priority: 20 });
await bus.methodChannel(name + '-ch').setMethodCallHandler((call) => call.arguments, { method: 'm' });
console.log('ready');
setInterval(() => {}, 1000);
"""

POSTER = r"""
import json, os, sys, notifbus
socket, stop, channels = sys.argv[1], sys.argv[2], sys.argv[3].split(",")
bus = notifbus.connect(socket, name="poster", timeout=10, reconnect=True)
counts = {"sent": 0, "result": 0, "lost": 0, "timeout": 0, "error": 0}
errors = {}
i = 0
while not os.path.exists(stop):
    i += 1
    counts["sent"] += 1
    try:
        if i % 2:
            bus.post("e", {"n": i})
        else:
            channel = channels[i % len(channels)]
            assert bus.method_channel(channel).invoke_method("m", i) == i
        counts["result"] += 1
    except notifbus.ConnectionLost as exc:
        counts["lost"] += 1
        why = str(exc).split(" (")[0]
        errors[why] = errors.get(why, 0) + 1
    except notifbus.RequestTimeout:
        counts["timeout"] += 1
    except notifbus.BrokerError as exc:
        counts["error"] += 1
        errors[exc.code] = errors.get(exc.code, 0) + 1
counts["errors"] = errors
print(json.dumps(counts), flush=True)
"""


def expected_observers(py: List[str], js: List[str], swift: str) -> Dict[str, List[Tuple[int, object]]]:
    """Per client name, the (priority, key) of its observers, in chain order."""
    out: Dict[str, List[Tuple[int, object]]] = {}
    for name in py + js:
        out[name] = [(10, name + "-k"), (20, None)]
    out[py[0]] = [(5, "shared"), (10, py[0] + "-k"), (20, None)]  # the taker
    out[swift] = [(15, swift + "-k")]
    return out


def snapshot(conn: sl.Conn) -> Tuple[Dict[str, List[Tuple[int, object]]], Counter, Dict[str, str]]:
    status = conn.request("status", timeout=5)["result"]
    names = {c["client"]: c["name"] for c in status["clients"]}
    observers: Dict[str, List[Tuple[int, object]]] = {}
    keys: Dict[str, str] = {}
    for o in status["observers"]:
        owner = names.get(o["client"], "?")
        observers.setdefault(owner, []).append((o["priority"], o["key"]))
        if o["key"] is not None:
            keys[o["key"]] = owner
    handlers = Counter(names.get(h["client"], "?") for h in status["handlers"])
    return observers, handlers, keys


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--restarts", type=int, default=20)
    args = parser.parse_args()
    sl.install_signal_cleanup()
    folder = sl.fresh_folder("nb-restarts-")
    binary = sl.snapshot_binary(folder)
    broker = sl.Broker(binary, folder, ["--hop-timeout", "2s", "--call-timeout", "2s"]).start()
    env = dict(os.environ, PYTHONPATH=PY_CLIENT)
    checks = sl.Checks("restarts")

    def spawn(command: List[str], quiet: bool = False) -> subprocess.Popen:
        # The CLI prints every event and call: nobody reads that, and a full pipe would
        # stall it, so its stdout goes nowhere.
        return sl.track(
            subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL if quiet else subprocess.PIPE,
                stderr=open(os.path.join(folder, "workers.log"), "ab"),
                env=env,
                text=True,
            )
        )

    py = ["py1", "py2"]
    js = ["js1"]
    swift = "sw1"
    workers = []
    # The first holder of "shared" is evicted by py1 before the chaos: it must never win it back.
    holder = spawn([sys.executable, "-c", PY_WORKER, "holder", broker.socket, "first-holder"])
    assert holder.stdout.readline().strip() == "ready"
    workers.append(spawn([sys.executable, "-c", PY_WORKER, py[0], broker.socket, "taker"]))
    workers.append(spawn([sys.executable, "-c", PY_WORKER, py[1], broker.socket, "plain"]))
    workers.append(spawn(["node", "--input-type=module", "-e", JS_WORKER, JS_CLIENT, js[0], broker.socket]))
    for w in workers:
        line = w.stdout.readline().strip()
        if line != "ready":
            print(f"a worker did not start: {line!r}", flush=True)
            return 1
    cli = [binary]
    workers.append(
        spawn(
            cli
            + ["observe", "e", "--priority", "15", "--key", swift + "-k", "--name", swift, "--socket", broker.socket],
            quiet=True,
        )
    )
    workers.append(
        spawn(
            cli + ["handle", swift + "-ch", "m", "--result", "1", "--name", swift, "--socket", broker.socket],
            quiet=True,
        )
    )
    expected = expected_observers(py, js, swift)
    expected_handlers = Counter({py[0]: 1, py[1]: 1, js[0]: 1, swift: 1})
    stop_file = os.path.join(folder, "stop")
    poster = spawn([sys.executable, "-c", POSTER, broker.socket, stop_file, "py1-ch,py2-ch,js1-ch"])

    def wait_back() -> Tuple[bool, float, str]:
        start = time.monotonic()
        last = ""
        while time.monotonic() - start < BACK_LIMIT:
            try:
                with sl.Conn(broker.socket) as conn:
                    conn.hello("restarts-probe")
                    observers, handlers, keys = snapshot(conn)
            except (OSError, sl.Closed, sl.Timeout) as exc:
                last = repr(exc)
                time.sleep(0.02)
                continue
            mine = {n: sorted(v, key=repr) for n, v in observers.items() if n in expected}
            want = {n: sorted(v, key=repr) for n, v in expected.items()}
            holders_ok = keys.get("shared") == py[0] and all(keys.get(n + "-k") == n for n in py + js + [swift])
            if mine == want and handlers == expected_handlers and holders_ok and "holder" not in observers:
                return True, time.monotonic() - start, ""
            last = f"observers {observers} handlers {dict(handlers)} keys {keys}"
            time.sleep(0.02)
        return False, BACK_LIMIT, last

    ok, _, detail = wait_back()
    checks.check("all registrations in place before the chaos", ok, detail)
    back_times = []
    failures = 0
    for n in range(args.restarts):
        time.sleep(0.3)
        how = "SIGTERM" if n % 2 == 0 else "SIGKILL"
        if how == "SIGTERM":
            broker.terminate()
        else:
            broker.kill()
        broker.start()
        ok, took, detail = wait_back()
        back_times.append(took)
        if not ok:
            failures += 1
            checks.check(f"restart {n + 1} ({how}): every observer once, keys with their latest owners", False, detail)
    checks.check(
        f"{args.restarts} restarts: every live observer present exactly once, every key with its latest owner",
        failures == 0,
        f"{failures} restarts failed",
    )
    open(stop_file, "w").close()
    try:
        out, _ = poster.communicate(timeout=30)
        counts = json.loads(out.strip().splitlines()[-1])
    except (subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        counts = {"sent": -1, "failure": repr(exc)}
    answered = counts.get("result", 0) + counts.get("lost", 0) + counts.get("error", 0)
    checks.check(
        "every request answered exactly once (a result, an error reply or connection lost)",
        counts.get("sent") == answered and counts.get("timeout", 1) == 0,
        json.dumps(counts),
    )
    # The poster makes one request at a time: at most one is in flight at each loss, and
    # the ones it makes while its client reconnects wait instead of failing.
    checks.check(
        "at most one request lost per restart (the one in flight)",
        counts.get("lost", 0) <= args.restarts,
        f"{counts.get('lost')} lost in {args.restarts} restarts",
    )
    back_times.sort()
    print(
        f"  restarts {args.restarts}; registrations back after readiness: median {back_times[len(back_times) // 2] * 1000:.0f} ms, "
        f"max {back_times[-1] * 1000:.0f} ms (status polled every 20 ms)",
        flush=True,
    )
    alive = [w.poll() is None for w in workers]
    checks.check("every worker still running", all(alive), str(alive))
    code = checks.report()
    sl.kill_children()
    if code == 0:
        import shutil

        shutil.rmtree(folder, ignore_errors=True)
    else:
        print(f"  kept {folder} for inspection", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
