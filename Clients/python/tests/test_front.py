"""The steps both client fronts play (``notifbus._front``): a call's steps get replies
and failures in order, and each work item runs its user code and answers as the
protocol says, whatever that code does. No broker and no sockets."""

from __future__ import annotations

import json
import logging
from typing import Any, List

import pytest

from notifbus import NEXT, STOP, BrokerError, Event
from notifbus._front import Ask, Play, work_steps
from notifbus._session import DeliverCall, DeliverEvent, NotifyEviction, Request, SendFrame, Session
from notifbus._types import Eviction


def play_sync(steps: Any, replies: List[Any]) -> Any:
    """Play ``steps`` as the blocking front does, answering each Ask with the next reply
    (raised when it is an exception) and calling each Run."""
    play = Play(steps)
    step = play.next()
    while step is not None:
        try:
            if isinstance(step, Ask):
                reply = replies.pop(0)
                if isinstance(reply, Exception):
                    raise reply
                play.answer(reply)
            else:
                play.answer(step.code())
        except Exception as exc:
            play.fail(exc)
        step = play.next()
    return play.result


def body(frame: bytes) -> Any:
    return json.loads(frame[4:])


def test_play_sends_replies_and_throws_failures_in():
    seen: List[Any] = []

    def steps():
        seen.append((yield Ask(Request("ping", {}), 1.0)))
        try:
            yield Ask(Request("ping", {}), None)
        except BrokerError as exc:
            seen.append(exc.code)
        return "done"

    assert play_sync(steps(), ["first", BrokerError("not_found", "gone")]) == "done"
    assert seen == ["first", "not_found"]


def test_a_failure_the_steps_do_not_catch_comes_out_of_next():
    def steps():
        yield Ask(Request("ping", {}), None)
        return "never"

    with pytest.raises(BrokerError) as raised:
        play_sync(steps(), [BrokerError("queue_full", "full")])
    assert raised.value.code == "queue_full"


def test_steps_without_a_step_return_at_once():
    assert play_sync(work_steps(Session(), SendFrame(b"\x00\x00\x00\x02{}")), []) == b"\x00\x00\x00\x02{}"


def event() -> Event:
    return Event(name="e", payload={"n": 1}, event=7, observer="o1")


def test_an_observer_verdict_becomes_its_answer():
    assert body(play_sync(work_steps(Session(), DeliverEvent(event(), lambda e: STOP)), [])) == {
        "op": "stop",
        "event": 7,
    }
    assert body(play_sync(work_steps(Session(), DeliverEvent(event(), lambda e: NEXT)), [])) == {
        "op": "next",
        "event": 7,
    }


def test_an_observer_that_raises_passes_the_event_on(caplog):
    def fails(e: Event) -> Any:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="notifbus"):
        frame = play_sync(work_steps(Session(), DeliverEvent(event(), fails)), [])
    assert body(frame) == {"op": "next", "event": 7}


def test_a_method_call_handler_returns_its_result_or_its_error():
    call = DeliverCall(call=3, channel="ch", method="m", arguments=[1], handler=lambda m, a: {"got": a})
    assert body(play_sync(work_steps(Session(), call), [])) == {"op": "return", "call": 3, "result": {"got": [1]}}

    def fails(m: str, a: Any) -> Any:
        raise ValueError("bad")

    failing = DeliverCall(call=4, channel="ch", method="m", arguments=None, handler=fails)
    answer = body(play_sync(work_steps(Session(), failing), []))
    assert answer["op"] == "return" and answer["call"] == 4 and answer["error"]["code"] == "error"


def test_an_eviction_callback_runs_answers_nothing_and_its_failure_is_logged(caplog):
    got: List[Eviction] = []
    eviction = Eviction("observer", "o1", "o2")
    assert play_sync(work_steps(Session(), NotifyEviction(eviction, got.append)), []) is None
    assert got == [eviction]

    def fails(e: Eviction) -> None:
        raise RuntimeError("boom")

    with caplog.at_level(logging.ERROR, logger="notifbus"):
        assert play_sync(work_steps(Session(), NotifyEviction(eviction, fails)), []) is None
    assert "on_evicted callback failed for o1" in caplog.text
