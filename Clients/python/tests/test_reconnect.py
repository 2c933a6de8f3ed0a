"""Clients that outlive the broker: a real broker is restarted under a blocking and an
asyncio client (SIGTERM and SIGKILL); observers, handlers, keys and order come back, a
pending request fails exactly once, and a newer key holder is not evicted by a resume.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List

import pytest

import notifbus
import notifbus.aio

from conftest import SHUTDOWN_LIMIT, Broker

#: Longest a client may take to be back after the broker is ready again.
BACK_LIMIT = 20.0


def restart(broker: Broker, how: signal.Signals) -> None:
    """Stop the broker with ``how`` and start a new one on the same socket."""
    broker.process.send_signal(how)
    broker.process.wait(SHUTDOWN_LIMIT)
    log = open(broker.log_path, "ab")
    command = [str(a) for a in broker.process.args]
    broker.process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
    broker._log = log
    broker._wait_ready()


def wait_for(predicate: Callable[[], bool], what: str, limit: float = BACK_LIMIT) -> None:
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"not within {limit} s: {what}")


def chain_of(status: Dict[str, Any], client_id: str) -> List[tuple]:
    return [(o["events"], o["priority"], o["key"]) for o in status["observers"] if o["client"] == client_id]


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_blocking_client_comes_back_with_observers_handlers_and_keys(broker: Broker, how: signal.Signals) -> None:
    states: List[notifbus.ConnectionState] = []
    evictions: List[notifbus.Eviction] = []
    bus = notifbus.connect(broker.socket, name="survivor", timeout=10, on_connection_state=states.append)
    first = bus.add_observer("e", lambda ev: notifbus.NEXT, priority=10, key="k-first", on_evicted=evictions.append)
    second = bus.add_observer(["e", "f"], lambda ev: notifbus.NEXT, priority=10)
    third = bus.add_observer("e", lambda ev: notifbus.Complete("done"), priority=30, key="k-third")
    channel = bus.method_channel("ch")
    handler = channel.set_method_call_handler(lambda method, args: {"echo": args}, "m")
    with notifbus.connect(broker.socket) as probe:
        before = chain_of(probe.status(), bus.client_id)

    # A take waiting at the loss fails exactly once and is not re-sent: with
    # `shutting_down` when the broker stops cleanly, else with ConnectionLost.
    outcomes: List[str] = []

    def waiting_take() -> None:
        try:
            bus.take("never", wait=30)
            outcomes.append("result")
        except notifbus.ConnectionLost:
            outcomes.append("lost")
        except notifbus.BrokerError as exc:
            outcomes.append(exc.code)
        except Exception as exc:  # noqa: BLE001 - recorded and checked below
            outcomes.append(repr(exc))

    taker = threading.Thread(target=waiting_take)
    taker.start()
    time.sleep(0.2)
    restart(broker, how)
    taker.join(BACK_LIMIT)
    assert outcomes == (["shutting_down"] if how == signal.SIGTERM else ["lost"])
    wait_for(lambda: any(s.state == "reconnected" for s in states), "reconnected state")
    assert [s.state for s in states] == ["disconnected", "reconnected"]
    back = states[-1]
    assert set(back.ids) == {first, second, third, handler} and back.superseded == []

    with notifbus.connect(broker.socket, reconnect=False) as probe:
        status = probe.status()
        assert chain_of(status, bus.client_id) == before
        assert [h["channel"] for h in status["handlers"] if h["client"] == bus.client_id] == ["ch"]
        result = probe.post("e", {"n": 1})
        assert [hop.observer for hop in result.trace] == [back.ids[first], back.ids[second], back.ids[third]]
        assert result.outcome == "completed" and result.value == "done"
        assert probe.method_channel("ch").invoke_method("m", [1]) == {"echo": [1]}
        # The broker's slot 'never' saw no second take: the request was not re-sent.
        assert probe.status()["counters"]["posted"] == 1
    assert bus.current_id(first) == back.ids[first]
    # Handles given out before the restart still work.
    assert bus.remove_observer(second) == [second]
    assert evictions == []
    bus.close()


def test_resume_yields_to_a_newer_key_holder(broker: Broker) -> None:
    states: List[notifbus.ConnectionState] = []
    evictions: List[notifbus.Eviction] = []
    bus = notifbus.connect(broker.socket, timeout=10, on_connection_state=states.append)
    bus.add_observer("e", lambda ev: notifbus.NEXT, key="k", on_evicted=evictions.append)
    restart(broker, signal.SIGKILL)
    # A newcomer takes the key right after the restart; whoever comes first, the
    # newcomer holds the key in the end and the old holder hears of it exactly once.
    newcomer = notifbus.connect(broker.socket, reconnect=False)
    mine = newcomer.add_observer("e", lambda ev: notifbus.STOP, key="k")
    wait_for(lambda: any(s.state == "reconnected" for s in states), "reconnected state")
    wait_for(lambda: len(evictions) == 1, "one eviction")
    time.sleep(0.2)
    assert len(evictions) == 1 and evictions[0].by == mine
    status = newcomer.status()
    assert [(o["observer"], o["key"]) for o in status["observers"]] == [(mine, "k")]
    newcomer.close()
    bus.close()


def test_requests_while_reconnecting_wait_within_their_timeout(broker: Broker) -> None:
    states: List[notifbus.ConnectionState] = []
    bus = notifbus.connect(broker.socket, timeout=10, on_connection_state=states.append)
    bus.add_observer("e", lambda ev: notifbus.NEXT)
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(SHUTDOWN_LIMIT)
    wait_for(lambda: len(states) == 1, "disconnected state")
    assert not bus.connected
    with pytest.raises(notifbus.RequestTimeout, match="unreachable"):
        bus.ping(timeout=0.3)
    done: List[str] = []
    waiter = threading.Thread(target=lambda: (bus.ping(timeout=BACK_LIMIT), done.append("pong")))
    waiter.start()
    restart_only(broker)
    waiter.join(BACK_LIMIT)
    assert done == ["pong"]
    bus.close()


def test_reconnect_false_stays_lost(broker: Broker) -> None:
    bus = notifbus.connect(broker.socket, timeout=5, reconnect=False)
    bus.add_observer("e", lambda ev: notifbus.NEXT)
    restart(broker, signal.SIGTERM)
    wait_for(lambda: not bus.connected, "lost")
    time.sleep(0.3)
    with pytest.raises(notifbus.ConnectionLost):
        bus.ping()
    bus.close()


def _post_outcome(post: Callable[[], Any]) -> str:
    """How a post ended, as the keyed-resend tests compare it."""
    try:
        result = post()
        return f"{result.outcome if result.value is None else result.value} repeat={result.repeat}"
    except notifbus.ConnectionLost:
        return "lost"
    except notifbus.BrokerError as exc:
        return f"{exc.code} repeat={exc.repeat}"


def test_keyed_posts_in_flight_are_sent_again_and_answered_once(
    make_broker: Callable[..., Broker], tmp_path: Any
) -> None:
    """A broker with --state-dir is killed with posts in flight: the keyed ones are sent
    again on the new connection and answered exactly once (the running one hears
    ``interrupted``, the queued ones run once), the unkeyed one fails."""
    broker = make_broker(extra=["--state-dir", str(tmp_path / "state")])
    seen: List[Any] = []
    release = threading.Event()

    def observer(event: notifbus.Event) -> notifbus.Verdict:
        seen.append(event.payload)
        if event.payload == "held":
            release.wait(BACK_LIMIT)  # the broker dies while this event runs
        return notifbus.Complete(event.payload)

    bus = notifbus.connect(broker.socket, timeout=20)
    bus.add_observer("e", observer)
    # Holds nothing but its keyed post in flight: it reconnects for it.
    poster = notifbus.connect(broker.socket, timeout=20)
    outcomes: Dict[str, str] = {}
    threads: List[threading.Thread] = []

    def post(label: str, client: notifbus.Client, once: Any) -> None:
        def run() -> None:
            outcomes[label] = _post_outcome(lambda: client.post("e", label, once=once))

        thread = threading.Thread(target=run)
        thread.start()
        threads.append(thread)

    try:
        post("held", bus, "k-held")
        wait_for(lambda: seen == ["held"], "the held event runs")
        post("queued", bus, "k-queued")
        post("plain", bus, None)
        post("solo", poster, "k-solo")
        with notifbus.connect(broker.socket, reconnect=False) as probe:
            wait_for(lambda: probe.status()["queue"]["pending"] == 3, "three posts queued")
        restart(broker, signal.SIGKILL)
        for thread in threads:
            thread.join(BACK_LIMIT)
        assert outcomes["held"] == "interrupted repeat=True"
        assert outcomes["queued"] == "queued repeat=False"
        assert outcomes["plain"] == "lost"
        # Run once on the new broker, before or after the observer is made again.
        assert outcomes["solo"] in ("solo repeat=False", "unhandled repeat=False")
        assert [p for p in seen if p != "solo"] == ["held", "queued"] and seen.count("solo") <= 1

        again = bus.post("e", "queued", once="k-queued")
        assert again.repeat and again.value == "queued"
        with pytest.raises(notifbus.BrokerError) as conflict:
            bus.post("e", "other", once="k-queued")
        assert conflict.value.code == "once_conflict" and not conflict.value.repeat
        with notifbus.connect(broker.socket, reconnect=False) as probe:
            assert probe.status()["counters"]["posted"] == 2
    finally:
        release.set()
        poster.close()
        bus.close()


def test_asyncio_keyed_post_in_flight_is_sent_again(make_broker: Callable[..., Broker], tmp_path: Any) -> None:
    broker = make_broker(extra=["--state-dir", str(tmp_path / "state")])

    async def scenario() -> None:
        seen: List[Any] = []
        release = asyncio.Event()

        async def observer(event: notifbus.Event) -> notifbus.Verdict:
            seen.append(event.payload)
            if event.payload == "held":
                await release.wait()
            return notifbus.Complete(event.payload)

        bus = await notifbus.aio.connect(broker.socket, timeout=20)
        await bus.add_observer("e", observer)

        async def outcome(payload: str, once: Any) -> str:
            try:
                result = await bus.post("e", payload, once=once)
                return f"{result.value} repeat={result.repeat}"
            except notifbus.ConnectionLost:
                return "lost"
            except notifbus.BrokerError as exc:
                return f"{exc.code} repeat={exc.repeat}"

        held = asyncio.ensure_future(outcome("held", "k-held"))
        while seen != ["held"]:
            await asyncio.sleep(0.01)
        queued = asyncio.ensure_future(outcome("queued", "k-queued"))
        plain = asyncio.ensure_future(outcome("plain", None))
        async with await notifbus.aio.connect(broker.socket, reconnect=False) as probe:
            while (await probe.status())["queue"]["pending"] < 2:
                await asyncio.sleep(0.01)
        await asyncio.get_running_loop().run_in_executor(None, restart, broker, signal.SIGKILL)
        results = await asyncio.wait_for(asyncio.gather(held, queued, plain), BACK_LIMIT)
        assert results == ["interrupted repeat=True", "queued repeat=False", "lost"]
        assert seen == ["held", "queued"]
        release.set()
        await bus.close()

    asyncio.run(scenario())


def restart_only(broker: Broker) -> None:
    log = open(broker.log_path, "ab")
    broker.process = subprocess.Popen(
        [str(a) for a in broker.process.args], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
    )
    broker._log = log
    broker._wait_ready()


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_asyncio_client_comes_back(broker: Broker, how: signal.Signals) -> None:
    async def scenario() -> None:
        states: List[notifbus.ConnectionState] = []
        back = asyncio.Event()

        async def on_state(state: notifbus.ConnectionState) -> None:
            states.append(state)
            if state.state == "reconnected":
                back.set()

        bus = await notifbus.aio.connect(broker.socket, name="aio", timeout=10, on_connection_state=on_state)
        first = await bus.add_observer("e", lambda ev: notifbus.NEXT, priority=5, key="ak")

        async def later(ev: notifbus.Event) -> notifbus.Verdict:
            return notifbus.Complete(ev.payload)

        second = await bus.add_observer("e", later, priority=6)
        handler = await bus.method_channel("ach").set_method_call_handler(lambda m, a: m)
        pending = asyncio.ensure_future(bus.take("nothing", wait=30))
        await asyncio.sleep(0.2)
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, restart, broker, how)
        expected = notifbus.BrokerError if how == signal.SIGTERM else notifbus.ConnectionLost
        with pytest.raises(expected):
            await asyncio.wait_for(pending, BACK_LIMIT)
        await asyncio.wait_for(back.wait(), BACK_LIMIT)
        assert [s.state for s in states] == ["disconnected", "reconnected"]
        ids = states[-1].ids
        assert set(ids) == {first, second, handler}
        async with await notifbus.aio.connect(broker.socket, reconnect=False) as probe:
            result = await probe.post("e", "p")
            assert [hop.observer for hop in result.trace] == [ids[first], ids[second]]
            assert result.value == "p"
            assert await probe.method_channel("ach").invoke_method("zz") == "zz"
            keys = [o["key"] for o in (await probe.status())["observers"]]
            assert keys == ["ak", None]
        assert await bus.remove_observer(first) == [first]
        await bus.close()

    asyncio.run(scenario())


def test_socket_activation_holds_reconnects_in_the_backlog(tmp_path: Any) -> None:
    """As under systemd: a listening socket outlives the broker (passed as fd 3 with
    LISTEN_FDS), so the client's connect waits in the backlog while no broker runs, and
    the new broker answers it: one disconnected, one reconnected, the observer back."""
    import os
    import socket as _socket

    from conftest import broker_binary

    path = str(tmp_path / "s")
    if len(path) > 100:
        pytest.skip("temporary path too long for a Unix socket")
    listener = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(64)
    fd = listener.fileno()
    os.set_inheritable(fd, True)

    def start() -> subprocess.Popen:
        script = f'exec 3<&{fd}; LISTEN_FDS=1 LISTEN_PID=$$ exec "{broker_binary()}" broker --socket "{path}"'
        return subprocess.Popen(
            ["bash", "-c", script],
            pass_fds=(fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )

    states: List[notifbus.ConnectionState] = []
    broker = start()
    try:
        wait_for(lambda: _accepts(path), "activated broker answers")
        bus = notifbus.connect(path, timeout=10, on_connection_state=states.append)
        bus.add_observer("e", lambda ev: notifbus.NEXT, key="act")
        broker.send_signal(signal.SIGTERM)
        broker.wait(SHUTDOWN_LIMIT)
        time.sleep(0.3)  # no broker: the client's connect waits in the backlog
        broker = start()
        wait_for(lambda: any(s.state == "reconnected" for s in states), "reconnected")
        assert [s.state for s in states] == ["disconnected", "reconnected"]
        with notifbus.connect(path, reconnect=False) as probe:
            assert [o["key"] for o in probe.status()["observers"]] == ["act"]
        bus.close()
    finally:
        broker.send_signal(signal.SIGTERM)
        broker.wait(SHUTDOWN_LIMIT)
        listener.close()


def _accepts(path: str) -> bool:
    import socket as _socket

    probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        probe.settimeout(1)
        probe.connect(path)
        body = b'{"op":"hello","id":1,"protocol":1}'
        probe.sendall(len(body).to_bytes(4, "big") + body)
        return bool(probe.recv(4))
    except OSError:
        return False
    finally:
        probe.close()


def test_monitor_comes_back_after_a_restart(broker: Broker) -> None:
    """A monitor alone is reason to reconnect, and it is started again on the new
    connection: frames of posts made after the restart reach the callback."""
    seen: List[notifbus.SeenFrame] = []
    states: List[notifbus.ConnectionState] = []
    bus = notifbus.connect(broker.socket, name="watcher", timeout=10, on_connection_state=states.append)
    bus.monitor(seen.append)
    restart(broker, signal.SIGKILL)
    wait_for(lambda: [s.state for s in states] == ["disconnected", "reconnected"], "reconnected")
    with notifbus.connect(broker.socket, reconnect=False) as poster:
        poster.post("after-restart", {"n": 1})
    wait_for(lambda: any("after-restart" in str(s.frame) for s in seen), "the post after the restart mirrored")
    bus.close()


def test_asyncio_monitor_comes_back_after_a_restart(broker: Broker) -> None:
    async def scenario() -> None:
        seen: List[notifbus.SeenFrame] = []
        back = asyncio.Event()

        def on_state(state: notifbus.ConnectionState) -> None:
            if state.state == "reconnected":
                back.set()

        bus = await notifbus.aio.connect(broker.socket, name="aio-watcher", timeout=10, on_connection_state=on_state)
        await bus.monitor(seen.append)
        await asyncio.get_running_loop().run_in_executor(None, restart, broker, signal.SIGTERM)
        await asyncio.wait_for(back.wait(), BACK_LIMIT)
        async with await notifbus.aio.connect(broker.socket, reconnect=False) as poster:
            await poster.post("after-restart", {"n": 2})
        deadline = time.monotonic() + BACK_LIMIT
        while not any("after-restart" in str(s.frame) for s in seen):
            assert time.monotonic() < deadline, "the post after the restart was not mirrored"
            await asyncio.sleep(0.02)
        await bus.close()

    asyncio.run(scenario())


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_blocking_run_forever_and_wait_closed_wait_through_a_restart(broker: Broker, how: signal.Signals) -> None:
    """The observer process of the README: run_forever() on one thread, wait_closed() on
    another. The broker restarts; both go on waiting, the observer answers again, and only
    close() ends them, run_forever without an error."""
    states: List[notifbus.ConnectionState] = []
    bus = notifbus.connect(broker.socket, name="forever", timeout=10, on_connection_state=states.append)
    bus.add_observer("e", lambda ev: notifbus.Complete("served"), key="forever")
    ended: List[str] = []

    def serve() -> None:
        try:
            bus.run_forever()
            ended.append("run_forever returned")
        except BaseException as exc:  # noqa: BLE001 - recorded and checked below
            ended.append(f"run_forever raised {exc!r}")

    def wait() -> None:
        ended.append(f"wait_closed returned {bus.wait_closed()}")

    threads = [threading.Thread(target=serve, daemon=True), threading.Thread(target=wait, daemon=True)]
    for thread in threads:
        thread.start()
    restart(broker, how)
    wait_for(lambda: [s.state for s in states] == ["disconnected", "reconnected"], "reconnected state")
    with notifbus.connect(broker.socket, reconnect=False) as probe:
        assert probe.post("e").value == "served"
    assert ended == [] and not bus.wait_closed(0.2)
    bus.close()
    for thread in threads:
        thread.join(BACK_LIMIT)
    assert sorted(ended) == ["run_forever returned", "wait_closed returned True"]


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_asyncio_run_forever_and_wait_closed_wait_through_a_restart(broker: Broker, how: signal.Signals) -> None:
    async def scenario() -> None:
        back = asyncio.Event()

        def on_state(state: notifbus.ConnectionState) -> None:
            if state.state == "reconnected":
                back.set()

        bus = await notifbus.aio.connect(broker.socket, name="aio-forever", timeout=10, on_connection_state=on_state)
        await bus.add_observer("e", lambda ev: notifbus.Complete("served"), key="aio-forever")
        runner = asyncio.ensure_future(bus.run_forever())
        waiter = asyncio.ensure_future(bus.wait_closed())
        await asyncio.get_running_loop().run_in_executor(None, restart, broker, how)
        await asyncio.wait_for(back.wait(), BACK_LIMIT)
        async with await notifbus.aio.connect(broker.socket, reconnect=False) as probe:
            assert (await probe.post("e")).value == "served"
        await asyncio.sleep(0.2)
        assert not runner.done() and not waiter.done()
        await bus.close()
        await asyncio.wait_for(runner, BACK_LIMIT)  # returns: no ConnectionLost
        await asyncio.wait_for(waiter, BACK_LIMIT)

    asyncio.run(scenario())


@pytest.mark.parametrize("client", ["blocking", "asyncio"])
def test_run_forever_ends_with_connection_lost_when_reconnection_is_off(broker: Broker, client: str) -> None:
    if client == "blocking":
        bus = notifbus.connect(broker.socket, timeout=5, reconnect=False)
        bus.add_observer("e", lambda ev: notifbus.NEXT)
        broker.kill()
        with pytest.raises(notifbus.ConnectionLost):
            bus.run_forever()
        assert bus.wait_closed(0)
        bus.close()
        return

    async def scenario() -> None:
        bus = await notifbus.aio.connect(broker.socket, timeout=5, reconnect=False)
        await bus.add_observer("e", lambda ev: notifbus.NEXT)
        await asyncio.get_running_loop().run_in_executor(None, broker.kill)
        with pytest.raises(notifbus.ConnectionLost):
            await asyncio.wait_for(bus.run_forever(), BACK_LIMIT)
        await asyncio.wait_for(bus.wait_closed(), BACK_LIMIT)
        await bus.close()

    asyncio.run(scenario())
