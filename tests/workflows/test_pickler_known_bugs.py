"""Reproducers of checkpoint bugs found in the pickler, kept as regression tests.

They live in the pickler (``workflows/_compiler/_pickler.py``); a bug not yet fixed is marked
xfail(strict=True) here, and the differential corpus entries it makes diverge in
``test_differential.KNOWN_BUGS``. This module holds the reproducers that the in-process corpus
runs cannot show (a restore in a fresh process) and the cases around each fix.
"""

from __future__ import annotations

from collections import deque

import pytest

from workflows import timer, workflow
from workflows._compiler import _dequestate
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter


@workflow
async def local_class_qualname():
    """Returns the qualified name of a class made in the workflow, after an await."""
    class Local:
        """Made here."""

        size: int = 3
        tag = "x"

        def twice(self):
            return 2 * self.size

    await timer("t", 1)
    return (
        Local.__qualname__, Local.__name__, Local.__module__, Local.__doc__,
        Local.__annotations__, Local.tag, Local().twice(), repr(Local)[:-1],
    )


def _in_a_fresh_process(blob: bytes) -> str:
    return resume_in_a_new_interpreter(blob, workflow_id="wf-1", workflow_type="k", now=0.0,
                                       answer="str", timeout=60)


def test_class_made_in_a_workflow_keeps_its_qualname_in_a_fresh_process():
    h = WorkflowHarness(local_class_qualname, roundtrip=False)
    got = _in_a_fresh_process(h.checkpoint())
    qual = "local_class_qualname.<locals>.Local"
    assert got == repr((
        qual, "Local", __name__, "Made here.", {"size": "int"}, "x", 6, f"<class '{__name__}.{qual}'",
    ))


def test_class_made_in_a_workflow_keeps_its_qualname_in_process():
    h = WorkflowHarness(local_class_qualname)
    h.fire_timer("t")
    assert h.result()[0] == "local_class_qualname.<locals>.Local"


@workflow
async def deque_iterators_across_an_await(change):
    """A forward and a reversed deque iterator, and an exhausted one, live across an await."""
    q = deque([1, 2, 3])
    fwd, rev, done = iter(q), reversed(q), iter(q)
    first = (next(fwd), next(rev), list(done))
    if change == "append":
        q.append(4)
    elif change == "same length":
        q.append(4)
        q.popleft()
    await timer("t", 1)
    out = [first, fwd.__length_hint__(), rev.__length_hint__()]
    for it in (fwd, rev, done, fwd):
        try:
            out.append(list(it))
        except RuntimeError as e:
            out.append(str(e))
    return out


def _native(change):
    q = deque([1, 2, 3])
    fwd, rev, done = iter(q), reversed(q), iter(q)
    first = (next(fwd), next(rev), list(done))
    if change == "append":
        q.append(4)
    elif change == "same length":
        q.append(4)
        q.popleft()
    out = [first, fwd.__length_hint__(), rev.__length_hint__()]
    for it in (fwd, rev, done, fwd):
        try:
            out.append(list(it))
        except RuntimeError as e:
            out.append(str(e))
    return out


@pytest.mark.parametrize("change", [None, "append", "same length"])
def test_deque_iterators_keep_their_mutation_check_across_a_restore(change):
    """A deque changed after its iterators were made: each raises 'deque mutated during
    iteration' at its next step after a restore, as natively; one not changed goes on."""
    h = WorkflowHarness(deque_iterators_across_an_await, change)
    h.fire_timer("t")
    assert h.result() == _native(change)
    if change:
        assert "deque mutated during iteration" in h.result()


@pytest.mark.parametrize("change", [None, "same length"])
def test_deque_iterators_keep_their_mutation_check_in_a_fresh_process(change):
    h = WorkflowHarness(deque_iterators_across_an_await, change, roundtrip=False)
    assert _in_a_fresh_process(h.checkpoint()) == repr(_native(change))


def test_deque_iterator_is_refused_where_its_state_cannot_be_read(monkeypatch):
    """Without a known layout a deque iterator is refused, named, rather than restored wrong."""
    from workflows import CheckpointError

    monkeypatch.setattr(_dequestate, "SUPPORTED", False)
    h = WorkflowHarness(deque_iterators_across_an_await, None, roundtrip=False)
    with pytest.raises(CheckpointError, match="deque iterator") as e:
        h.checkpoint()
    assert e.value.variable in ("fwd", "rev", "done")
