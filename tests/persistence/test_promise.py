"""Promise: the one-shot outcome every queued write and every signal waits on."""

from __future__ import annotations

import threading
from concurrent.futures import CancelledError, InvalidStateError

import pytest

from persistence import Promise


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
