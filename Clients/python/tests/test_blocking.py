"""The blocking client against a real broker: chains, channels, slots, categories,
errors and lost connections. Every wait is bounded."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import threading
import time
from typing import Any, List

import pytest

import notifbus
from notifbus import NEXT, STOP, BrokerError, Complete, ConnectionLost, MethodCallError, MissingPluginError

from samples import CATEGORIES, DEFAULT_ACTION, notification


def open_client(broker, name: str = "test") -> notifbus.Client:
    return notifbus.connect(broker.socket, name=name, timeout=10)


def recorder(log: List[str], label: str, verdict: Any = NEXT):
    def handler(event: notifbus.Event) -> Any:
        log.append(label)
        return verdict

    return handler


# -- connection -----------------------------------------------------------------------


def test_hello_and_status(broker):
    with open_client(broker, "mail-app") as bus:
        assert bus.client_id and bus.client_id.startswith("c")
        assert bus.server and bus.server.startswith("notifbus/")
        assert bus.max_frame == 1048576
        bus.ping()
        status = bus.status()
        assert {"client": bus.client_id, "name": "mail-app"}.items() <= next(
            c for c in status["clients"] if c["client"] == bus.client_id
        ).items()
        assert status["queue"] == {"pending": 0, "current": None, "maxPerClient": 1250}
    assert not bus.connected
    with pytest.raises(ConnectionLost):
        bus.ping()


def test_status_follows_its_pages(broker):
    # 24 observers of 64 names of 250 bytes make a status of about 400 KB: two pages.
    with open_client(broker, "pages") as bus:
        ids = [
            bus.add_observer([f"{i}-{n}-".ljust(250, "x") for n in range(64)], lambda event: NEXT) for i in range(24)
        ]
        first = bus._perform(bus._session.status(), None)
        assert first["next"] is not None and len(first["observers"]) < 24
        status = bus.status()
        assert [o["observer"] for o in status["observers"]] == ids
        assert status["next"] is None
        assert status["clients"] == first["clients"]


def test_socket_from_environment(broker, monkeypatch):
    monkeypatch.setenv("NOTIFBUS_SOCKET", broker.socket)
    with notifbus.connect(timeout=10) as bus:
        bus.ping()


def test_connect_to_missing_socket_raises_oserror(tmp_path):
    with pytest.raises(OSError):
        notifbus.connect(str(tmp_path / "none.sock"), timeout=2)


def test_connection_beyond_max_clients_is_refused(make_broker):
    broker = make_broker(extra=["--max-clients", "1"])
    # The fixture's readiness probe counts until the broker has seen it close.
    deadline = time.monotonic() + 5
    while True:
        try:
            only = open_client(broker, "only")
            break
        except BrokerError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)
    with only:
        for _ in range(3):
            with pytest.raises(BrokerError) as refused:
                open_client(broker, "extra")
            assert refused.value.code == "too_many_clients"
        only.ping()


# -- observers and chains ---------------------------------------------------------------


def test_priority_order_and_ties_across_connections(broker):
    log: List[str] = []
    with open_client(broker, "a") as a, open_client(broker, "b") as b:
        first_ten = a.add_observer("tick", recorder(log, "a10"), priority=10)
        five = b.add_observer(["tick"], recorder(log, "b5"), priority=5)
        second_ten = b.add_observer("tick", recorder(log, "b10"), priority=10)
        default = a.add_observer("tick", recorder(log, "a100"))
        result = b.post("tick", {"n": 1})
        assert log == ["b5", "a10", "b10", "a100"]
        assert result.outcome == "unhandled"
        assert result.by is None and result.value is None and result.retained is None
        assert [(hop.observer, hop.reply) for hop in result.trace] == [
            (five, "next"),
            (first_ten, "next"),
            (second_ten, "next"),
            (default, "next"),
        ]
        assert [o["observer"] for o in a.status()["observers"]] == [five, first_ten, second_ten, default]


def test_event_object_carries_name_payload_and_ids(broker):
    seen: List[notifbus.Event] = []
    with open_client(broker) as bus:
        observer = bus.add_observer(["one", "two"], lambda event: seen.append(event) or NEXT)
        result = bus.post("two", {"nested": [1, {"x": None}]})
        assert seen == [
            notifbus.Event(name="two", payload={"nested": [1, {"x": None}]}, event=result.event, observer=observer)
        ]
        bus.post("one")
        assert seen[-1].payload is None and seen[-1].name == "one"
        assert bus.post("three").trace == []


def test_complete_ends_chain_with_value(broker):
    log: List[str] = []
    with open_client(broker) as bus:
        bus.add_observer("e", recorder(log, "first"), priority=1)
        completer = bus.add_observer("e", recorder(log, "second", Complete({"ok": [1, 2]})), priority=2)
        bus.add_observer("e", recorder(log, "third"), priority=3)
        result = bus.post("e")
        assert log == ["first", "second"]
        assert (result.outcome, result.by, result.value) == ("completed", completer, {"ok": [1, 2]})
        assert [hop.reply for hop in result.trace] == ["next", "complete"]


def test_stop_ends_chain_without_value(broker):
    log: List[str] = []
    with open_client(broker) as bus:
        stopper = bus.add_observer("e", recorder(log, "stopper", STOP), priority=-5)
        bus.add_observer("e", recorder(log, "after"))
        result = bus.post("e", "payload")
        assert log == ["stopper"]
        assert (result.outcome, result.by, result.value) == ("stopped", stopper, None)
        assert [(hop.observer, hop.reply) for hop in result.trace] == [(stopper, "stop")]


def test_raising_handler_answers_next_and_chain_goes_on(broker, caplog):
    def broken(event: notifbus.Event) -> Any:
        raise RuntimeError("handler bug")

    with open_client(broker) as bus:
        bus.add_observer("e", broken, priority=1)
        last = bus.add_observer("e", lambda event: Complete("done"), priority=2)
        result = bus.post("e")
        assert result.outcome == "completed" and result.by == last and result.value == "done"
        assert [hop.reply for hop in result.trace] == ["next", "complete"]
    assert "handler bug" in caplog.text


def test_key_replacement_evicts_the_old_observer(broker):
    evicted = threading.Event()
    evictions: List[notifbus.Eviction] = []

    def on_evicted(eviction: notifbus.Eviction) -> None:
        evictions.append(eviction)
        evicted.set()

    log: List[str] = []
    with open_client(broker, "a") as a, open_client(broker, "b") as b:
        old = a.add_observer("e", recorder(log, "old"), key="mail", on_evicted=on_evicted)
        new = b.add_observer("e", recorder(log, "new"), key="mail")
        assert evicted.wait(5)
        assert evictions == [notifbus.Eviction("observer", old, new)]
        result = a.post("e")
        assert log == ["new"]
        assert [hop.observer for hop in result.trace] == [new]
        assert [(o["observer"], o["key"]) for o in a.status()["observers"]] == [(new, "mail")]


def test_remove_observer_by_id_and_by_key(broker):
    log: List[str] = []
    with open_client(broker, "a") as a, open_client(broker, "b") as b:
        by_id = a.add_observer("e", recorder(log, "id"))
        by_key = a.add_observer("e", recorder(log, "key"), key="k1")
        assert b.remove_observer(by_id) == [by_id]
        assert b.remove_observer_by_unique_key("k1") == [by_key]
        result = a.post("e")
        assert log == [] and result.outcome == "unhandled" and result.trace == []
        with pytest.raises(BrokerError) as missing:
            a.remove_observer(by_id)
        assert missing.value.code == "not_found"
        with pytest.raises(BrokerError) as missing_key:
            a.remove_observer_by_unique_key("k1")
        assert missing_key.value.code == "not_found"


def test_slow_handler_does_not_hold_up_the_connection(broker):
    entered = threading.Event()
    release = threading.Event()

    def slow(event: notifbus.Event) -> Any:
        entered.set()
        release.wait(10)
        return Complete("late")

    with open_client(broker, "observer") as observer, open_client(broker, "poster") as poster:
        observer.add_observer("slow", slow)
        results: List[notifbus.PostResult] = []
        posting = threading.Thread(target=lambda: results.append(poster.post("slow")))
        posting.start()
        assert entered.wait(5)
        # The handler is still running; the same connection keeps serving requests.
        observer.ping()
        observer.put("side", 1)
        assert observer.take("side") == 1
        assert observer.status()["queue"]["current"] is not None
        release.set()
        posting.join(10)
        assert results and results[0].value == "late"


def test_hop_timeout_and_gone_hops_pass_the_event_on(make_broker):
    broker = make_broker(hop_timeout="300ms")
    release = threading.Event()
    with open_client(broker, "a") as a, open_client(broker, "b") as b:
        sleeper = a.add_observer("e", lambda event: release.wait(5) and NEXT, priority=1)
        last = b.add_observer("e", lambda event: Complete(1), priority=2)
        result = b.post("e")
        release.set()
        assert [(hop.observer, hop.reply) for hop in result.trace] == [(sleeper, "timeout"), (last, "complete")]

        doomed = open_client(broker, "doomed")
        quitter = doomed.add_observer("e", lambda event: doomed.close(), priority=0)
        result = b.post("e")
        assert [(hop.observer, hop.reply) for hop in result.trace][0] == (quitter, "gone")
        assert result.outcome == "completed" and result.by == last


# -- method channels ------------------------------------------------------------------


def test_method_channel_python_to_python(broker):
    received: List[tuple] = []

    def handler(method: str, arguments: Any) -> Any:
        received.append((method, arguments))
        return {"echo": arguments, "method": method}

    with open_client(broker, "app") as app, open_client(broker, "caller") as caller:
        handler_id = app.method_channel("notification_interaction").set_method_call_handler(handler)
        assert handler_id.startswith("h")
        channel = caller.method_channel("notification_interaction")
        assert channel.invoke_method("current_email_id", {"a": [1, None]}) == {
            "echo": {"a": [1, None]},
            "method": "current_email_id",
        }
        assert channel.invoke_method("no_args") == {"echo": None, "method": "no_args"}
        assert received == [("current_email_id", {"a": [1, None]}), ("no_args", None)]
        handlers = caller.status()["handlers"]
        assert {
            "handler": handler_id,
            "client": app.client_id,
            "channel": "notification_interaction",
            "method": None,
        } in handlers


def nested(depth: int) -> Any:
    """A list nested `depth` levels deep around 1, built without recursion."""
    value: Any = 1
    for _ in range(depth):
        value = [value]
    return value


def depth_of(value: Any) -> int:
    depth = 0
    while isinstance(value, list):
        value, depth = value[0], depth + 1
    return depth


def test_user_data_nested_100000_deep_goes_both_ways(broker):
    """Far deeper than ``json`` goes: an observer gets the payload and completes with it,
    a handler gets the arguments and returns them, and the connections stay up."""
    deep = nested(100_000)
    seen: List[int] = []

    def observe(event: notifbus.Event) -> Any:
        seen.append(depth_of(event.payload))
        return Complete(event.payload)

    with open_client(broker, "app") as app, open_client(broker, "poster") as poster:
        app.add_observer("deep", observe)
        app.method_channel("deep").set_method_call_handler(lambda method, arguments: arguments)
        result = poster.post("deep", deep)
        assert result.outcome == "completed" and depth_of(result.value) == 100_000 and seen == [100_000]
        assert depth_of(poster.method_channel("deep").invoke_method("echo", deep)) == 100_000
        app.ping()
        poster.ping()


CHILD_HANDLER = """
import sys, notifbus
def handler(method, arguments):
    return {"seen": arguments, "reply": method.upper()}
with notifbus.connect(sys.argv[1], name="child", timeout=10) as bus:
    bus.method_channel("child").set_method_call_handler(handler)
    print("ready", flush=True)
    sys.stdin.read()
"""


def test_method_channel_between_processes(broker):
    environment = dict(os.environ, PYTHONPATH=os.path.join(os.path.dirname(os.path.dirname(__file__)), "src"))
    command = [sys.executable, "-c", CHILD_HANDLER, broker.socket]
    with subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=environment, text=True) as child:
        try:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
            with open_client(broker, "parent") as parent:
                channel = parent.method_channel("child")
                assert channel.invoke_method("hello", os.getpid()) == {"seen": os.getpid(), "reply": "HELLO"}
                assert channel.invoke_method("again", [1]) == {"seen": [1], "reply": "AGAIN"}
            assert child.communicate(timeout=10) == ("", None)
            assert child.returncode == 0
        finally:
            if child.poll() is None:
                child.kill()


def test_method_handler_beats_channel_handler(broker):
    with open_client(broker, "app") as app, open_client(broker, "caller") as caller:
        app_channel = app.method_channel("ch")
        app_channel.set_method_call_handler(lambda method, arguments: "whole channel")
        app_channel.set_method_call_handler(lambda method, arguments: "just m", method="m")
        channel = caller.method_channel("ch")
        assert channel.invoke_method("m") == "just m"
        assert channel.invoke_method("other") == "whole channel"
        app_channel.set_method_call_handler(None, method="m")
        assert channel.invoke_method("m") == "whole channel"


def test_not_implemented_raises_missing_plugin_error(broker):
    def handler(method: str, arguments: Any) -> Any:
        if method == "known":
            return True
        raise NotImplementedError(method)

    with open_client(broker) as bus:
        channel = bus.method_channel("plugin")
        with pytest.raises(MissingPluginError) as nobody:
            channel.invoke_method("anything")
        assert nobody.value.code == "not_implemented"
        channel.set_method_call_handler(handler)
        assert channel.invoke_method("known") is True
        with pytest.raises(MissingPluginError) as refused:
            channel.invoke_method("unknown")
        assert refused.value.code == "not_implemented" and refused.value.message == "unknown"
        channel.set_method_call_handler(None)
        with pytest.raises(MissingPluginError):
            channel.invoke_method("known")


def test_handler_errors_keep_code_message_and_details(broker):
    def handler(method: str, arguments: Any) -> Any:
        if method == "details":
            raise MethodCallError("E_QUOTA", "over quota", {"limit": 5, "used": [6]})
        if method == "null_details":
            raise MethodCallError("E_NULL", "null details", None)
        if method == "no_details":
            raise MethodCallError("E_NONE", "no details")
        raise ValueError("plain failure")

    with open_client(broker, "app") as app, open_client(broker, "caller") as caller:
        app.method_channel("errors").set_method_call_handler(handler)
        channel = caller.method_channel("errors")
        with pytest.raises(MethodCallError) as detailed:
            channel.invoke_method("details")
        assert (detailed.value.code, detailed.value.message, detailed.value.details) == (
            "E_QUOTA",
            "over quota",
            {"limit": 5, "used": [6]},
        )
        assert detailed.value.has_details
        with pytest.raises(MethodCallError) as null:
            channel.invoke_method("null_details")
        assert null.value.has_details and null.value.details is None
        with pytest.raises(MethodCallError) as none:
            channel.invoke_method("no_details")
        assert not none.value.has_details and none.value.code == "E_NONE"
        with pytest.raises(MethodCallError) as plain:
            channel.invoke_method("plain")
        assert (plain.value.code, plain.value.message) == (notifbus.HANDLER_EXCEPTION_CODE, "plain failure")
        assert not isinstance(plain.value, MissingPluginError)


def test_latest_handler_wins_and_owner_learns_of_eviction(broker):
    evictions: List[notifbus.Eviction] = []
    evicted = threading.Event()

    def on_evicted(eviction: notifbus.Eviction) -> None:
        evictions.append(eviction)
        evicted.set()

    with open_client(broker, "a") as a, open_client(broker, "b") as b:
        first = a.method_channel("ch").set_method_call_handler(lambda m, args: "a1", on_evicted=on_evicted)
        # Replacing one's own handler is silent.
        second = a.method_channel("ch").set_method_call_handler(lambda m, args: "a2", on_evicted=on_evicted)
        assert first != second
        assert b.method_channel("ch").invoke_method("m") == "a2"
        third = b.method_channel("ch").set_method_call_handler(lambda m, args: "b")
        assert evicted.wait(5)
        assert evictions == [notifbus.Eviction("handler", second, third)]
        assert a.method_channel("ch").invoke_method("m") == "b"


def test_calls_run_concurrently(broker):
    barrier = threading.Barrier(3, timeout=5)

    def handler(method: str, arguments: Any) -> Any:
        barrier.wait()
        return arguments

    with open_client(broker, "app") as app, open_client(broker, "caller") as caller:
        app.method_channel("ch").set_method_call_handler(handler)
        channel = caller.method_channel("ch")
        results: List[Any] = []
        threads = [threading.Thread(target=lambda n=n: results.append(channel.invoke_method("m", n))) for n in range(3)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(10)
        assert sorted(results) == [0, 1, 2]


def test_broker_call_timeout_and_client_timeout(make_broker):
    broker = make_broker(call_timeout="300ms")
    release = threading.Event()
    with open_client(broker, "app") as app, open_client(broker, "caller") as caller:
        app.method_channel("ch").set_method_call_handler(lambda m, args: release.wait(5))
        channel = caller.method_channel("ch")
        with pytest.raises(MethodCallError) as late:
            channel.invoke_method("m")
        assert late.value.code == "timeout"
        # The client's own timeout (RequestTimeout), not the broker's (MethodCallError "timeout").
        with pytest.raises(notifbus.RequestTimeout):
            channel.invoke_method("m", timeout=0.05)
        # The broker's own timeout reply comes later and is dropped.
        time.sleep(0.5)
        assert caller.peek("nothing") is None
        release.set()
        caller.ping()


def test_handler_gone_when_handler_connection_closes(broker):
    entered = threading.Event()
    with open_client(broker, "caller") as caller:
        app = open_client(broker, "app")

        def handler(method: str, arguments: Any) -> Any:
            entered.set()
            time.sleep(0.5)
            return None

        app.method_channel("ch").set_method_call_handler(handler)
        closer = threading.Thread(target=lambda: entered.wait(5) and app.close())
        closer.start()
        with pytest.raises(MethodCallError) as gone:
            caller.method_channel("ch").invoke_method("m")
        closer.join(5)
        assert gone.value.code == "handler_gone"


# -- slots ----------------------------------------------------------------------------


def test_put_take_peek(broker):
    with open_client(broker) as bus:
        assert bus.peek("launch") is None
        first = bus.put("launch", {"emailId": "e-1"})
        assert (first.replaced, first.delivered) == (False, False)
        assert bus.put("launch", {"emailId": "e-2"}).replaced is True
        assert bus.peek("launch") == {"emailId": "e-2"}
        assert bus.status()["slots"] == ["launch"]
        assert bus.take("launch") == {"emailId": "e-2"}
        assert bus.take("launch") is None
        bus.put("launch", 0)
        assert bus.put("launch", None).replaced is True
        assert bus.peek("launch") is None


def test_take_wait_fulfilled_by_a_later_put(broker):
    with open_client(broker, "taker") as taker, open_client(broker, "putter") as putter:
        puts: List[notifbus.PutResult] = []

        def put_later() -> None:
            time.sleep(0.3)
            puts.append(putter.put("launch", {"late": True}))

        thread = threading.Thread(target=put_later)
        thread.start()
        assert taker.take("launch", wait=5) == {"late": True}
        thread.join(5)
        assert puts == [notifbus.PutResult(replaced=False, delivered=True)]
        assert putter.peek("launch") is None


def test_take_wait_times_out_with_none(broker):
    # None when the wait ends, and the take waits no more: the next put finds no taker and
    # stays in the slot. (When the wait ends is the broker core's to hold, on a fake clock.)
    with open_client(broker) as bus:
        assert bus.take("empty", wait=0.3) is None
        assert bus.put("empty", "kept") == notifbus.PutResult(replaced=False, delivered=False)
        assert bus.peek("empty") == "kept"


# -- notification profile -------------------------------------------------------------


def test_categories_set_get_and_rejected_set(broker):
    with open_client(broker) as bus:
        assert bus.notification_categories() == []
        assert bus.set_notification_categories(CATEGORIES) == 2
        assert bus.notification_categories() == CATEGORIES
        broken = copy.deepcopy(CATEGORIES)
        broken[0]["actions"][0]["options"] = ["sideways"]
        with pytest.raises(BrokerError) as rejected:
            bus.set_notification_categories(broken)
        assert rejected.value.code == "bad_request"
        duplicate = [CATEGORIES[0], CATEGORIES[0]]
        with pytest.raises(BrokerError):
            bus.set_notification_categories(duplicate)
        assert bus.notification_categories() == CATEGORIES


def test_launch_retention_of_unhandled_default_action(broker):
    with open_client(broker) as bus:
        bus.set_notification_categories(CATEGORIES)
        payload = {"actionIdentifier": DEFAULT_ACTION, "notification": notification()}
        result = bus.post("didReceive", payload)
        assert (result.outcome, result.retained) == ("unhandled", "launch")
        assert bus.take("launch") == payload
        declined = bus.post("didReceive", {"actionIdentifier": "DECLINE", "notification": notification()})
        assert declined.retained is None


def test_will_present_completion_is_checked(broker):
    with open_client(broker) as bus:
        bad = bus.add_observer("willPresent", lambda event: Complete("banner"), priority=1)
        good = bus.add_observer("willPresent", lambda event: Complete(["banner", "sound"]), priority=2)
        result = bus.post("willPresent", {"notification": notification()})
        assert [(hop.observer, hop.reply) for hop in result.trace] == [(bad, "invalid"), (good, "complete")]
        assert result.value == ["banner", "sound"]


# -- errors ---------------------------------------------------------------------------


def test_broker_error_codes(broker):
    with open_client(broker) as bus:
        with pytest.raises(BrokerError) as empty_name:
            bus.post("")
        assert empty_name.value.code == "bad_request"
        with pytest.raises(BrokerError) as bad_events:
            bus.add_observer([], lambda event: NEXT)
        assert bad_events.value.code == "bad_request"
        with pytest.raises(BrokerError) as bad_payload:
            bus.post("willPresent", {"notification": {"content": {}}})
        assert bad_payload.value.code == "invalid_payload"
        bus.set_notification_categories(CATEGORIES)
        with pytest.raises(BrokerError) as bad_action:
            bus.post("didReceive", {"actionIdentifier": "NOPE", "notification": notification()})
        assert bad_action.value.code == "invalid_action"
        # A wait beyond the broker's 10 minutes is refused before it is sent, in seconds.
        with pytest.raises(ValueError, match="0 to 600 seconds"):
            bus.take("s", wait=601)
        with pytest.raises(BrokerError) as unknown:
            bus.method_channel("ch").set_method_call_handler(lambda m, a: None, method="")
        assert unknown.value.code == "bad_request"
        bus.ping()


def test_local_misuse_raises_before_sending(broker):
    with open_client(broker) as bus:
        with pytest.raises(TypeError):
            bus.add_observer("e", "not callable")  # type: ignore[arg-type]
        with pytest.raises(TypeError):
            bus.post("e", {"x": object()})
        with pytest.raises(ValueError):
            bus.put("big", "x" * (bus.max_frame + 1))
        bus.ping()


# -- lost connections -----------------------------------------------------------------


def test_broker_killed_during_invoke_fails_the_call_promptly(broker):
    entered = threading.Event()
    release = threading.Event()
    app = open_client(broker, "app")
    caller = open_client(broker, "caller")
    try:
        app.method_channel("ch").set_method_call_handler(lambda m, args: entered.set() or release.wait(10))
        killer = threading.Thread(target=lambda: entered.wait(5) and broker.kill())
        killer.start()
        # ConnectionLost, not RequestTimeout: the call failed when the connection did.
        with pytest.raises(ConnectionLost):
            caller.method_channel("ch").invoke_method("m")
        killer.join(5)
        with pytest.raises(ConnectionLost):
            caller.ping()
        assert not caller.connected
    finally:
        release.set()
        app.close()
        caller.close()


def test_broker_killed_during_take_wait_fails_the_call_promptly(broker):
    with open_client(broker) as bus:
        timer = threading.Timer(0.3, broker.kill)
        timer.start()
        # ConnectionLost, not None after the 30 s wait: the take failed when the connection did.
        with pytest.raises(ConnectionLost):
            bus.take("launch", wait=30)
        timer.join(5)


def test_broker_sigterm_answers_shutting_down(broker):
    with open_client(broker) as bus:
        timer = threading.Timer(0.3, broker.terminate)
        timer.start()
        with pytest.raises(BrokerError) as shutting:
            bus.take("launch", wait=30)
        assert shutting.value.code == "shutting_down"
        timer.join(5)
        assert broker.process.wait(5) == 0


def test_close_fails_pending_calls(broker):
    with open_client(broker) as bus:
        timer = threading.Timer(0.3, bus.close)
        timer.start()
        with pytest.raises(ConnectionLost):
            bus.take("launch", wait=30)
        timer.join(5)
