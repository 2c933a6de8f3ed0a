"""The asyncio client against a real broker: the same ground as test_blocking, with
coroutine handlers. Each test runs in its own loop under a time bound."""

from __future__ import annotations

import asyncio
import copy
import functools
import time
from typing import Any, Awaitable, Callable, List

import pytest

import notifbus
import notifbus.aio
from notifbus import NEXT, STOP, BrokerError, Complete, ConnectionLost, MethodCallError, MissingPluginError

from samples import CATEGORIES, DEFAULT_ACTION, notification

#: Longest one asyncio test may run.
ASYNC_TIME_LIMIT = 30.0


def bounded(test: Callable[..., Awaitable[None]]) -> Callable[..., None]:
    """Run an async test function in a fresh loop, failing it after ASYNC_TIME_LIMIT."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(asyncio.wait_for(test(*args, **kwargs), ASYNC_TIME_LIMIT))

    return run


async def open_client(broker, name: str = "test") -> notifbus.aio.Client:
    return await notifbus.aio.connect(broker.socket, name=name, timeout=10)


@bounded
async def test_hello_status_and_close(broker):
    async with await open_client(broker, "async-app") as bus:
        assert bus.client_id and bus.server and bus.max_frame == 1048576
        await bus.ping()
        status = await bus.status()
        assert any(c["client"] == bus.client_id and c["name"] == "async-app" for c in status["clients"])
    assert not bus.connected
    with pytest.raises(ConnectionLost):
        await bus.ping()


@bounded
async def test_connect_to_missing_socket_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        await notifbus.aio.connect(str(tmp_path / "none.sock"), timeout=2)


@bounded
async def test_connection_beyond_max_clients_is_refused(make_broker):
    broker = make_broker(extra=["--max-clients", "1"])
    # The fixture's readiness probe counts until the broker has seen it close.
    deadline = time.monotonic() + 5
    while True:
        try:
            only = await open_client(broker, "only")
            break
        except BrokerError:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.05)
    async with only:
        for _ in range(3):
            with pytest.raises(BrokerError) as refused:
                await open_client(broker, "extra")
            assert refused.value.code == "too_many_clients"
        await only.ping()


@bounded
async def test_chain_order_ties_and_coroutine_handlers(broker):
    log: List[str] = []

    def sync_handler(label: str, verdict: Any = NEXT):
        def handler(event: notifbus.Event) -> Any:
            log.append(label)
            return verdict

        return handler

    async def async_handler(event: notifbus.Event) -> Any:
        await asyncio.sleep(0.05)
        log.append("async")
        return Complete({"from": event.observer, "payload": event.payload})

    async with await open_client(broker, "a") as a, await open_client(broker, "b") as b:
        tie_one = await a.add_observer("e", sync_handler("tie1"), priority=7)
        tie_two = await b.add_observer("e", sync_handler("tie2"), priority=7)
        first = await b.add_observer("e", sync_handler("first"), priority=-1)
        completer = await a.add_observer(["e", "f"], async_handler, priority=50)
        await b.add_observer("e", sync_handler("never"), priority=60)
        result = await b.post("e", [1, 2])
        assert log == ["first", "tie1", "tie2", "async"]
        assert (result.outcome, result.by) == ("completed", completer)
        assert result.value == {"from": completer, "payload": [1, 2]}
        assert [(hop.observer, hop.reply) for hop in result.trace] == [
            (first, "next"),
            (tie_one, "next"),
            (tie_two, "next"),
            (completer, "complete"),
        ]


@bounded
async def test_user_data_nested_100000_deep_goes_both_ways(broker):
    """The asyncio front reads and writes values far deeper than ``json`` goes, too."""
    deep: Any = 1
    for _ in range(100_000):
        deep = [deep]

    def depth_of(value: Any) -> int:
        depth = 0
        while isinstance(value, list):
            value, depth = value[0], depth + 1
        return depth

    async with await open_client(broker, "app") as app, await open_client(broker, "poster") as poster:
        await app.add_observer("deep", lambda event: Complete(event.payload))
        result = await poster.post("deep", deep)
        assert result.outcome == "completed" and depth_of(result.value) == 100_000
        await app.ping()


@bounded
async def test_stop_and_raising_handlers(broker):
    async def broken(event: notifbus.Event) -> Any:
        raise RuntimeError("async handler bug")

    async with await open_client(broker) as bus:
        await bus.add_observer("e", broken, priority=1)
        stopper = await bus.add_observer("e", lambda event: STOP, priority=2)
        result = await bus.post("e")
        assert (result.outcome, result.by, result.value) == ("stopped", stopper, None)
        assert [hop.reply for hop in result.trace] == ["next", "stop"]


@bounded
async def test_key_eviction_and_removal(broker):
    evicted: "asyncio.Future[notifbus.Eviction]" = asyncio.get_running_loop().create_future()

    async def on_evicted(eviction: notifbus.Eviction) -> None:
        evicted.set_result(eviction)

    async with await open_client(broker, "a") as a, await open_client(broker, "b") as b:
        old = await a.add_observer("e", lambda event: NEXT, key="k", on_evicted=on_evicted)
        new = await b.add_observer("e", lambda event: NEXT, key="k")
        assert await asyncio.wait_for(evicted, 5) == notifbus.Eviction("observer", old, new)
        assert await a.remove_observer_by_unique_key("k") == [new]
        with pytest.raises(BrokerError) as missing:
            await a.remove_observer(new)
        assert missing.value.code == "not_found"
        assert (await a.post("e")).trace == []


@bounded
async def test_slow_coroutine_handler_does_not_hold_up_the_connection(broker):
    release = asyncio.Event()
    entered = asyncio.Event()

    async def slow(event: notifbus.Event) -> Any:
        entered.set()
        await release.wait()
        return Complete("late")

    async with await open_client(broker, "observer") as observer, await open_client(broker, "poster") as poster:
        await observer.add_observer("slow", slow)
        posting = asyncio.ensure_future(poster.post("slow"))
        await asyncio.wait_for(entered.wait(), 5)
        await observer.ping()
        assert await observer.peek("nothing") is None
        release.set()
        assert (await asyncio.wait_for(posting, 5)).value == "late"


@bounded
async def test_method_channels_both_ways(broker):
    async def app_handler(method: str, arguments: Any) -> Any:
        if method == "sum":
            await asyncio.sleep(0.01)
            return sum(arguments)
        if method == "details":
            raise MethodCallError("E_APP", "app failed", {"why": ["because"]})
        if method == "null_details":
            raise MethodCallError("E_APP", "null", None)
        if method == "crash":
            raise KeyError("missing")
        raise NotImplementedError(method)

    async with await open_client(broker, "app") as app, await open_client(broker, "shell") as shell:
        await app.method_channel("app").set_method_call_handler(app_handler)
        await shell.method_channel("shell").set_method_call_handler(lambda method, arguments: {"shell": arguments})
        assert await shell.method_channel("app").invoke_method("sum", [1, 2, 3]) == 6
        assert await app.method_channel("shell").invoke_method("x", "y") == {"shell": "y"}
        assert await app.method_channel("shell").invoke_method("x") == {"shell": None}
        with pytest.raises(MethodCallError) as detailed:
            await shell.method_channel("app").invoke_method("details")
        assert (detailed.value.code, detailed.value.message, detailed.value.details) == (
            "E_APP",
            "app failed",
            {"why": ["because"]},
        )
        with pytest.raises(MethodCallError) as null:
            await shell.method_channel("app").invoke_method("null_details")
        assert null.value.has_details and null.value.details is None
        with pytest.raises(MethodCallError) as crash:
            await shell.method_channel("app").invoke_method("crash")
        assert crash.value.code == notifbus.HANDLER_EXCEPTION_CODE and not crash.value.has_details
        with pytest.raises(MissingPluginError):
            await shell.method_channel("app").invoke_method("unknown")
        with pytest.raises(MissingPluginError):
            await shell.method_channel("nobody").invoke_method("m")
        await app.method_channel("app").set_method_call_handler(None)
        with pytest.raises(MissingPluginError):
            await shell.method_channel("app").invoke_method("sum", [1])


@bounded
async def test_concurrent_calls_and_handler_eviction(broker):
    gate = asyncio.Event()
    arrived: List[int] = []
    evictions: List[notifbus.Eviction] = []

    async def handler(method: str, arguments: Any) -> Any:
        arrived.append(arguments)
        if len(arrived) == 3:
            gate.set()
        await asyncio.wait_for(gate.wait(), 5)
        return arguments * 10

    async with await open_client(broker, "app") as app, await open_client(broker, "caller") as caller:
        held = await app.method_channel("ch").set_method_call_handler(handler, "m", on_evicted=evictions.append)
        channel = caller.method_channel("ch")
        results = await asyncio.gather(*(channel.invoke_method("m", n) for n in range(3)))
        assert results == [0, 10, 20]
        taker = await caller.method_channel("ch").set_method_call_handler(lambda m, a: "caller", "m")
        for _ in range(100):
            if evictions:
                break
            await asyncio.sleep(0.05)
        assert evictions == [notifbus.Eviction("handler", held, taker)]
        assert await app.method_channel("ch").invoke_method("m") == "caller"


@bounded
async def test_slots_with_waits(broker):
    async with await open_client(broker, "taker") as taker, await open_client(broker, "putter") as putter:
        assert (await putter.put("s", [1])) == notifbus.PutResult(replaced=False, delivered=False)
        assert await putter.peek("s") == [1]
        assert await taker.take("s") == [1]
        assert await taker.take("s") is None

        async def put_later() -> notifbus.PutResult:
            await asyncio.sleep(0.3)
            return await putter.put("launch", {"emailId": "e-9"})

        taken, put = await asyncio.gather(taker.take("launch", wait=5), put_later())
        assert taken == {"emailId": "e-9"}
        assert put.delivered is True
        # None when the wait ends, and the take waits no more: the next put stays in the slot.
        assert await taker.take("launch", wait=0.3) is None
        assert (await putter.put("launch", "kept")) == notifbus.PutResult(replaced=False, delivered=False)
        assert await putter.peek("launch") == "kept"


@bounded
async def test_categories_and_errors(broker):
    async with await open_client(broker) as bus:
        assert await bus.set_notification_categories(CATEGORIES) == 2
        assert await bus.notification_categories() == CATEGORIES
        broken = copy.deepcopy(CATEGORIES)
        del broken[1]["actions"][0]["title"]
        with pytest.raises(BrokerError) as rejected:
            await bus.set_notification_categories(broken)
        assert rejected.value.code == "bad_request"
        assert await bus.notification_categories() == CATEGORIES
        with pytest.raises(BrokerError) as bad_action:
            await bus.post("didReceive", {"actionIdentifier": "REPLY", "notification": notification("MESSAGE")})
        assert bad_action.value.code == "invalid_action"
        replied = await bus.post(
            "didReceive", {"actionIdentifier": "REPLY", "userText": "hi", "notification": notification("MESSAGE")}
        )
        assert (replied.outcome, replied.retained) == ("unhandled", None)
        launched = await bus.post("didReceive", {"actionIdentifier": DEFAULT_ACTION, "notification": notification()})
        assert launched.retained == "launch"
        with pytest.raises(BrokerError) as bad_payload:
            await bus.post("openSettings", {"notification": 5})
        assert bad_payload.value.code == "invalid_payload"
        with pytest.raises(BrokerError) as bad_request:
            await bus.add_observer("e", lambda event: NEXT, priority=2**31)
        assert bad_request.value.code == "bad_request"


@bounded
async def test_client_timeout_leaves_connection_usable(make_broker):
    broker = make_broker(call_timeout="10s")
    async with await open_client(broker, "app") as app, await open_client(broker, "caller") as caller:
        release = asyncio.Event()

        async def stuck(method: str, arguments: Any) -> Any:
            await release.wait()
            return "late"

        await app.method_channel("ch").set_method_call_handler(stuck)
        with pytest.raises(notifbus.RequestTimeout):
            await caller.method_channel("ch").invoke_method("m", timeout=0.2)
        release.set()
        await caller.ping()


@bounded
async def test_broker_killed_during_invoke_and_take(broker):
    entered = asyncio.Event()
    async with await open_client(broker, "app") as app, await open_client(broker, "caller") as caller:

        async def stuck(method: str, arguments: Any) -> Any:
            entered.set()
            await asyncio.sleep(60)

        await app.method_channel("ch").set_method_call_handler(stuck)
        invoke = asyncio.ensure_future(caller.method_channel("ch").invoke_method("m"))
        take = asyncio.ensure_future(app.take("launch", wait=30))
        await asyncio.wait_for(entered.wait(), 5)
        await asyncio.sleep(0.1)
        broker.kill()
        # ConnectionLost, not a timeout or None after the 30 s wait: both failed with the connection.
        for pending in (invoke, take):
            with pytest.raises(ConnectionLost):
                await asyncio.wait_for(pending, 5)
        with pytest.raises(ConnectionLost):
            await caller.ping()


@bounded
async def test_broker_sigterm_answers_shutting_down(broker):
    async with await open_client(broker) as bus:
        take = asyncio.ensure_future(bus.take("launch", wait=30))
        await asyncio.sleep(0.3)
        broker.terminate()
        with pytest.raises(BrokerError) as shutting:
            await asyncio.wait_for(take, 5)
        assert shutting.value.code == "shutting_down"
