"""The differential harness itself: its oracle is deterministic and its comparison sees differences."""

from __future__ import annotations

import pytest

from workflows import Cancelled, Event, ProcedureFailed, procedure, select, signal, timer, workflow
from workflows._context import ReducerCall

from .corpus_index import CORPUS
from .diffharness import (
    Oracle,
    Send,
    StepRecord,
    Throw,
    Trace,
    compare,
    run_compiled,
    run_native,
)
from .probes import LOG, double, explode, log
from .test_differential import CORPUS_MODULES  # noqa: F401 - loads the corpus


def _trace(log_=(), effects=(), command=None, outcome=("return", 1)) -> Trace:
    return Trace([StepRecord(list(log_), list(effects), command)], outcome)


def test_compare_accepts_identical_runs():
    """Two equal traces have no differences."""
    assert compare(_trace(["a"]), _trace(["a"]), with_chain=True) == []


@pytest.mark.parametrize(
    "other",
    [
        _trace(["b"]),
        _trace(["a"], effects=[ReducerCall("m:f", (1,))]),
        _trace(["a"], command=timer("t", 1)),
        _trace(["a"], outcome=("return", 2)),
        _trace(["a"], outcome=("raise", ValueError(1))),
    ],
    ids=["log", "effects", "command", "value", "exception"],
)
def test_compare_reports_each_kind_of_difference(other):
    """A different log entry, effect, command or outcome is reported."""
    assert compare(_trace(["a"]), other, with_chain=True)


def test_compare_sees_exception_chains_only_when_asked():
    """The cause/context chain is compared with with_chain=True, and only then."""
    a, b = KeyError("k"), KeyError("k")
    a.__context__ = ValueError("v")
    ta, tb = _trace(outcome=("raise", a)), _trace(outcome=("raise", b))
    assert compare(ta, tb, with_chain=True)
    assert compare(ta, tb, with_chain=False) == []


def test_oracle_answers_from_history_only():
    """Signals are delivered in order (also through select), procedures are computed, failures injected."""
    o = Oracle(signals={"s": [1, 2]}, choose=["s"], fail_at=frozenset({3}), cancel_at=4)
    h: list = []
    for cmd, want in [
        (signal("s"), Send(1)),
        (select(timer("t", 1), signal("s")), Send(Event("s", 2, "signal"))),
        (procedure(double, 21), Send(42)),
    ]:
        assert o(cmd, h) == want
        h.append((cmd, want))
    r = o(procedure(double, 1), h)
    assert isinstance(r, Throw) and isinstance(r.exception, ProcedureFailed)
    h.append((procedure(double, 1), r))
    r = o(timer("t", 1), h)
    assert isinstance(r, Throw) and isinstance(r.exception, Cancelled)
    failing = Oracle()(procedure(explode, 3), [])
    assert isinstance(failing, Throw) and failing.exception.error_type == "Oops"




class Forgetful:
    """An object whose own ``__reduce__`` leaves its state out: a restore makes it anew, empty
    (a divergence of the user's making, which no checkpoint can see)."""

    def __init__(self):
        self.seen = []

    def __reduce__(self):
        return (Forgetful, ())


@workflow
async def compares_state_its_reduce_drops(d):
    """Reads, after an await, state that the object's own ``__reduce__`` does not keep. (It
    compared an ``id()`` before and after the await: ids now come back as the restored
    object's.)"""
    box = Forgetful()
    for k in d:
        box.seen.append(log(k))
    await timer("t", 1)
    return box.seen == list(d)


def test_comparison_detects_a_real_divergence():
    """A local's state is lost by its own reduce at a restore, and the harness sees it."""
    native = run_native(compares_state_its_reduce_drops, ({"a": 1},), Oracle())
    assert native.outcome == ("return", True)
    same = run_compiled(compares_state_its_reduce_drops, ({"a": 1},), Oracle(), roundtrip=False)
    assert compare(native, same, with_chain=True) == []
    restored = run_compiled(compares_state_its_reduce_drops, ({"a": 1},), Oracle(), roundtrip=True)
    assert compare(native, restored, with_chain=True)


def test_runs_start_with_an_empty_log():
    """Entries logged before a run do not leak into its trace."""
    LOG.extend(["stale", "entries"])
    t = run_native(compares_state_its_reduce_drops, ({},), Oracle())
    assert t.steps[0].log == []
    LOG.extend(["stale"])
    t = run_compiled(compares_state_its_reduce_drops, ({},), Oracle())
    assert t.steps[0].log == []


def _cases():
    return [
        pytest.param(e, c, id=f"{e.name}-{i}") for e in CORPUS for i, c in enumerate(e.cases)
    ]


@pytest.mark.parametrize(("entry", "case"), _cases())
def test_harness_native_mode_matches_the_coroutine(entry, case):
    """WorkflowHarness(native=True) behaves exactly like driving the coroutine by hand."""
    direct = run_native(entry.wf, case.args, case.oracle)
    harness = run_compiled(entry.wf, case.args, case.oracle, native=True)
    diffs = compare(direct, harness, with_chain=True, label="harness-native")
    assert not diffs, "\n".join(diffs)
