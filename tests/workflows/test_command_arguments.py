"""The arguments of commands and policies: what each accepts, and the clear error for the rest."""

from __future__ import annotations

import datetime as dt

import pytest

from workflows import RetryPolicy, gather, procedure, publish, reducer, send, spawn, timer, workflow


class CardDeclined(Exception):
    pass


class StolenCard(CardDeclined):
    pass


def test_non_retryable_takes_exception_classes_and_names_and_matches_base_classes():
    policy = RetryPolicy(non_retryable=(CardDeclined, "KeyError", "socket.timeout"))
    assert policy.non_retryable == (f"{__name__}.CardDeclined", "KeyError", "socket.timeout")
    assert not policy.retries(CardDeclined())
    assert not policy.retries(StolenCard())  # a subclass of one named
    assert not policy.retries(KeyError())
    assert policy.retries(ValueError())
    assert RetryPolicy().retries(CardDeclined())


def test_intervals_take_a_timedelta_and_are_kept_as_seconds():
    policy = RetryPolicy(initial_interval=dt.timedelta(seconds=2), maximum_interval=dt.timedelta(minutes=1))
    assert (policy.initial_interval, policy.maximum_interval) == (2.0, 60.0)
    assert [policy.delay(n) for n in (1, 2, 6, 7)] == [2.0, 4.0, 60.0, 60.0]
    assert RetryPolicy(maximum_interval=float("inf")).delay(12) == 2048.0


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"non_retryable": "CardDeclined"}, TypeError, r"write it as a tuple: non_retryable=\('CardDeclined',\)"),
        ({"non_retryable": CardDeclined}, TypeError, r"must be a tuple of exception types or their names"),
        ({"non_retryable": (3,)}, TypeError, r"holds exception types or their names .*got 3"),
        ({"non_retryable": ("",)}, TypeError, r"got '' in"),
        ({"non_retryable": (int,)}, TypeError, r"got <class 'int'>"),
        ({"maximum_attempts": 2.5}, TypeError, r"maximum_attempts must be an int >= 1, got 2.5"),
        ({"maximum_attempts": True}, TypeError, r"maximum_attempts must be an int >= 1, got True"),
        ({"maximum_attempts": 0}, ValueError, r"maximum_attempts must be an int >= 1, got 0"),
        ({"initial_interval": "1"}, TypeError, r"initial_interval must be a number of seconds or a timedelta"),
        ({"initial_interval": -1}, ValueError, r"initial_interval must be >= 0 seconds, got -1"),
        ({"maximum_interval": float("nan")}, ValueError, r"maximum_interval must be finite"),
        ({"backoff_coefficient": 0.5}, ValueError, r"backoff_coefficient must be a finite number >= 1, got 0.5"),
        ({"backoff_coefficient": "2"}, TypeError, r"backoff_coefficient must be a number >= 1, got '2'"),
    ],
)
def test_a_bad_retry_policy_is_refused_saying_what_to_write(kwargs, error, match):
    with pytest.raises(error, match=match):
        RetryPolicy(**kwargs)


def test_timer_at_takes_epoch_seconds_or_an_aware_datetime():
    when = dt.datetime(2030, 1, 1, tzinfo=dt.UTC)
    assert timer("t", at=when).at == when.timestamp() == timer("t", at=when.timestamp()).at
    assert timer("t", at=1_900_000_000).at == 1_900_000_000.0


@pytest.mark.parametrize(
    ("at", "match"),
    [
        # a duration taken as an instant would be 1970: the deadline would pass at once
        (dt.timedelta(hours=1), r"at is a point in time .*got the duration .*write timer\('t', after="),
        (dt.datetime(2030, 1, 1), r"at is a naive datetime .*names no instant"),
        ("soon", r"at must be epoch seconds or an aware datetime, got 'soon'"),
        (True, r"at must be epoch seconds or an aware datetime, got True"),
    ],
)
def test_timer_at_refuses_what_names_no_instant(at, match):
    with pytest.raises(TypeError, match=match):
        timer("t", at=at)


def _double(x: int) -> int:
    return 2 * x


@pytest.mark.parametrize("timeout", [0, 0.0, -1, dt.timedelta(0), dt.timedelta(seconds=-5)])
def test_a_procedure_timeout_of_zero_or_less_is_refused(timeout):
    """A timeout of 0 or less abandoned each attempt at once, or let it finish, by how fast its
    thread started: it is a ValueError, at the call and at the decorator; a positive one (and a
    timedelta) is kept as seconds."""
    from workflows import procedure

    with pytest.raises(ValueError, match=r"procedure\(.*_double\) timeout must be more than 0 seconds"):
        procedure(_double, 1, timeout=timeout)
    with pytest.raises(ValueError, match=r"@procedure _double timeout must be more than 0 seconds"):
        procedure(timeout=timeout)(_double)
    assert procedure(_double, 1, timeout=dt.timedelta(milliseconds=250)).timeout == 0.25
    assert procedure(_double, 1, timeout=3).timeout == 3.0


async def _async_note(db, text):  # an async def where a plain one is needed
    db["notes"].insert({"text": text})


async def _async_gen(x):
    yield x


def test_an_async_def_procedure_or_reducer_is_refused_saying_to_write_a_plain_def():
    """An `async def` reducer only made a coroutine that was never awaited: the step committed
    without its writes (a RuntimeWarning was all). An `async def` procedure failed each call
    with an unpicklable coroutine. Both are refused at the decorator and at the call."""
    from workflows import procedure, reducer

    with pytest.raises(TypeError, match=r"@reducer _async_note is an 'async def', which would never run; .*plain def"):
        reducer(_async_note)
    with pytest.raises(TypeError, match=r"reducer _async_note is an 'async def'"):
        reducer(_async_note, "hello")
    with pytest.raises(TypeError, match=r"@procedure _async_note is an 'async def', .*asyncio\.run"):
        procedure(_async_note)
    with pytest.raises(TypeError, match=r"@procedure _async_gen is an 'async def'"):
        procedure(retry=RetryPolicy(maximum_attempts=2))(_async_gen)
    with pytest.raises(TypeError, match=r"procedure _async_note is an 'async def'"):
        procedure(_async_note, None, "x")


def test_a_workflow_or_the_other_kind_of_effect_is_refused_where_a_procedure_or_reducer_is_called():
    """`await procedure(child_wf, 1)` "succeeded" with an unawaited call of the workflow as its
    result; `reducer(a_procedure, 1)` restarted the workflow five times and failed it;
    `procedure(a_reducer, ...)` failed inside the reducer. Each is a TypeError at the call,
    saying how that function is called."""
    from workflows import procedure, reducer, workflow

    @workflow
    async def child(x: int) -> int:
        return x

    @procedure
    def price(x: int) -> int:
        return x

    @reducer
    def note(db, x: int) -> None:
        db["t"].insert({"x": x})

    with pytest.raises(TypeError, match=r"procedure .*child is a @workflow, .*await spawn\(.*child, \.\.\.\)"):
        procedure(child, 1)
    with pytest.raises(TypeError, match=r"reducer .*child is a @workflow"):
        reducer(child, 1)
    with pytest.raises(TypeError, match=r"@procedure .*child is a @workflow"):
        procedure(child)
    with pytest.raises(TypeError, match=r"reducer\(\) got .*price, which is a @procedure: .*await procedure\("):
        reducer(price, 1)
    with pytest.raises(TypeError, match=r"procedure\(\) got .*note, which is a @reducer: .*reducer\("):
        procedure(note, None, 1)
    assert procedure(price, 1).function.endswith("price")


@reducer
def _note(db, row):
    db["rows"].insert(dict(row))


@procedure
def _fetch(row):
    return row


@workflow
async def _child(row: dict) -> dict:
    return row


@workflow
async def _fills_one_dict_again() -> list:
    row = {"i": 0}
    cmds = []
    for i in range(3):
        row["i"] = i
        reducer(_note, row)
        send("other", "row", row)
        publish("row", row)
        cmds.append(procedure(_fetch, row=row))
        cmds.append(spawn(_child, row))
    row["i"] = 99
    return await gather(*cmds)


def test_what_a_command_takes_is_the_value_at_the_call_not_at_the_commit():
    """A reducer's arguments, a send's or publish's payload, a procedure's and a child's
    arguments are taken as they are at the call: a loop that fills one dict again before each
    gave every one of them the last value (three rows `{"i": 2}` written, sent and passed), as
    they were read only when the step committed."""
    from workflows._context import Publish, ReducerCall, Send
    from workflows.testing import WorkflowHarness

    h = WorkflowHarness(_fills_one_dict_again)
    rows = [e.args[0] for e in h.effects if isinstance(e, ReducerCall)]
    sent = [e.payload for e in h.effects if isinstance(e, Send)]
    published = [e.value for e in h.effects if isinstance(e, Publish)]
    assert rows == sent == published == [{"i": 0}, {"i": 1}, {"i": 2}]
    passed = [c.kwargs["row"] if hasattr(c, "kwargs") else c.args[0] for c in h.command.commands]
    assert passed == [{"i": 0}, {"i": 0}, {"i": 1}, {"i": 1}, {"i": 2}, {"i": 2}]
