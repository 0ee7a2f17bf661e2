"""Promise: the one-shot outcome every queued write and every signal waits on."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError, InvalidStateError

import pytest

from persistence import Promise
from persistence._promise import hold_wakeups, let_go


def test_result_set_by_another_thread_wakes_every_waiter() -> None:
    p: Promise[int] = Promise()
    got: list[int] = []
    waiters = [threading.Thread(target=lambda: got.append(p.result(10))) for _ in range(3)]
    for t in waiters:
        t.start()
    assert not p.done()
    p.set_result(7)
    for t in waiters:
        t.join(10)
    assert got == [7, 7, 7]
    assert p.done() and p.exception(0) is None and p.result(0) == 7


def test_an_error_is_raised_by_result_and_returned_by_exception() -> None:
    p: Promise[int] = Promise()
    err = ValueError("no")
    p.set_exception(err)
    with pytest.raises(ValueError, match="no"):
        p.result(1)
    assert p.exception(1) is err


def test_result_times_out_while_unset() -> None:
    p: Promise[int] = Promise()
    with pytest.raises(TimeoutError):
        p.result(0.01)
    with pytest.raises(TimeoutError):
        p.exception(0)


def test_an_outcome_is_set_once() -> None:
    p: Promise[int] = Promise()
    p.set_result(1)
    with pytest.raises(InvalidStateError):
        p.set_result(2)
    with pytest.raises(InvalidStateError):
        p.set_exception(RuntimeError())
    assert p.result(0) == 1


def test_cancel_only_before_an_outcome() -> None:
    p: Promise[int] = Promise()
    assert p.cancel() and p.cancelled() and p.done()
    with pytest.raises(CancelledError):
        p.result(0)
    q: Promise[int] = Promise()
    q.set_result(3)
    assert not q.cancel() and not q.cancelled()


def test_done_callbacks_run_once_on_the_setting_thread_or_at_once_if_already_set() -> None:
    p: Promise[int] = Promise()
    calls: list[tuple[str, int]] = []
    p.add_done_callback(lambda q: calls.append((threading.current_thread().name, q.result(0))))
    setter = threading.Thread(target=lambda: p.set_result(3), name="setter")
    setter.start()
    setter.join(10)
    assert calls == [("setter", 3)]
    p.add_done_callback(lambda q: calls.append((threading.current_thread().name, q.result(0))))
    assert calls == [("setter", 3), (threading.current_thread().name, 3)]
    with pytest.raises(InvalidStateError):
        p.set_result(4)
    assert len(calls) == 2


def test_a_failing_done_callback_is_logged_and_the_others_still_run(caplog: pytest.LogCaptureFixture) -> None:
    p: Promise[int] = Promise()
    seen: list[BaseException | None] = []
    p.add_done_callback(lambda q: 1 / 0)
    p.add_done_callback(lambda q: seen.append(q.exception(0)))
    err = KeyError("k")
    p.set_exception(err)
    assert seen == [err]
    assert "promise_callback_failed" in caplog.text


def test_an_answer_held_by_its_thread_is_set_at_once_and_wakes_its_waiters_at_let_go() -> None:
    p: Promise[int] = Promise()
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(p.result(10)))
    waiter.start()
    seen: list[object] = []

    def answering() -> None:
        hold_wakeups()
        try:
            p.answer(5)
            # The outcome is there at once, for this thread and for any that looks...
            seen.extend([p.done(), p.result(0), p._gate.locked()])
            assert not p.answer(6)  # ...and is set once
        finally:
            let_go()
        seen.append(p._gate.locked())

    t = threading.Thread(target=answering)
    t.start()
    t.join(10)
    waiter.join(10)
    # ...but a thread blocked on it is let go only at let_go().
    assert seen == [True, 5, True, False]
    assert got == [5]


def test_a_wait_that_times_out_while_its_answer_is_held_returns_the_answer() -> None:
    # On a thread of its own: a thread holds its wake-ups for good once it asked to (an engine
    # thread does), and the thread the tests run on must not.
    p: Promise[int] = Promise()
    seen: list[object] = []

    def answering() -> None:
        hold_wakeups()
        try:
            p.answer(3)
            seen.extend([p.result(0.01), p.exception(0.01)])
        finally:
            let_go()

    t = threading.Thread(target=answering)
    t.start()
    t.join(10)
    assert not t.is_alive()
    assert seen == [3, None]


def test_answer_from_a_thread_that_does_not_hold_wakes_at_once() -> None:
    p: Promise[int] = Promise()
    t = threading.Thread(target=p.answer, args=(4,))
    t.start()
    t.join(10)
    assert not p._gate.locked() and p.result(0) == 4
