"""A restored set behaves as the original would have: same order, same pops, same growth.

A checkpoint records a set's hash table slot by slot (its elements, the dummy slots of removed
ones, its size and its pop finger) and the restore rebuilds that table (see
``workflows/_compiler/_settable.py``). Random sequences of add, discard, pop and clear on ints
(also ones that collide: equal modulo the table size, -1 and -2, which hash alike) and strings
run with a checkpoint and restore at every await, and after it more random operations, also while
a loop iterates the set (an add and a discard per turn: the loop goes on by its slot), against
the uninterrupted native run. In another process, a set of ints comes back the same; a set of
strings the same under the same ``PYTHONHASHSEED`` and, under another one (where strings hash
otherwise), with the same elements in that process's order, the workflow going on.
"""

from __future__ import annotations

import os
import pickle

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workflows import CheckpointError
from workflows._compiler import _settable, checkpoint, restore
from workflows.testing import WorkflowHarness

from .corpus_sets import set_operations
from .diffharness import in_a_new_interpreter, resume_in_a_new_interpreter

INTS = st.one_of(
    st.integers(-3, 40),
    st.integers(0, 40).map(lambda i: i * 8),  # equal modulo 8
    st.integers(0, 40).map(lambda i: i * 64),  # equal modulo 8, 16, 32 and 64
    st.integers(0, 8).map(lambda i: 2**61 - 1 + i),  # hash wraps around modulo 2**61 - 1
    st.sampled_from([-1, -2]),  # hash(-1) == hash(-2) == -2
)
STRS = st.text("abc", min_size=0, max_size=3)


def operations(elements):
    element_ops = st.tuples(st.sampled_from(["add", "add", "add", "discard"]), elements)
    other = st.sampled_from([("pop",), ("pop",), ("list",), ("clear",), ("await",)])
    bulk = st.tuples(st.just("update"), st.lists(elements, max_size=12))
    return st.lists(st.one_of(element_ops, element_ops, other, bulk), max_size=80)


def loop_operations(elements):
    """Operations two by two, one per turn of the loop: mostly an add with a discard (the size
    kept), sometimes one alone (the size changed: the next turn raises)."""
    pair = st.tuples(st.tuples(st.just("add"), elements), st.tuples(st.just("discard"), elements))
    alone = st.tuples(st.tuples(st.sampled_from(["add", "discard"]), elements), st.just(("list",)))
    return st.lists(st.one_of(pair, pair, pair, alone), max_size=10).map(
        lambda turns: tuple(op for turn in turns for op in turn)
    )


def _run(ops, native, loop_ops=()):
    h = WorkflowHarness(set_operations, ops, loop_ops, native=native)
    steps = 0
    while not h.done:
        steps += 1
        assert steps < 200
        h.send(None)
    assert h.exception is None, h.exception
    return h.value


SETS = settings(
    max_examples=int(os.environ.get("ACTORFLOW_FUZZ_EXAMPLES", 150)),
    deadline=None,
    derandomize="ACTORFLOW_FUZZ_EXAMPLES" not in os.environ,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETS
@given(operations(INTS), loop_operations(INTS))
def test_int_sets_restored_at_every_await_behave_as_uninterrupted(ops, loop_ops):
    assert _run(ops, False, loop_ops) == _run(ops, True, loop_ops)


@SETS
@given(operations(STRS), loop_operations(STRS))
def test_str_sets_restored_at_every_await_behave_as_uninterrupted(ops, loop_ops):
    assert _run(ops, False, loop_ops) == _run(ops, True, loop_ops)


def test_the_set_table_reader_supports_this_interpreter():
    """3.11 to 3.13 are read (else every set with a table a plain rebuild would not give is
    refused, loudly); the self-test at import read known tables back."""
    assert _settable.SUPPORTED


def test_a_table_that_cannot_be_rebuilt_is_refused_at_checkpoint():
    """problem() is what the checkpoint asks; a table emptier than any set shrinks to, or
    fuller than one it keeps, is named."""
    t = _settable.read(set(range(100)))
    assert _settable.problem(t) is None
    sparse = _settable.Table(1024, 0, bytes([1]) + bytes(1023), t.hashes)
    assert "fewer than a set shrinks at" in _settable.problem(sparse)
    full = _settable.Table(16, 0, bytes([1] * 12 + [0] * 4), t.hashes)
    assert "more than a set keeps" in _settable.problem(full)


# ---------------------------------------------------------------------------------------------
# Another process

def _checkpointed(ops, seed, steps=0):
    """The checkpoint of ``set_operations(ops)`` at its first await (or ``steps`` awaits later),
    made in a new interpreter under that hash seed."""
    return resume_in_a_new_interpreter(
        None, module="tests.workflows.corpus_sets", workflow="set_operations", args=(ops,),
        harness=False, workflow_type="t", now=0.0, steps=steps + 1, hash_seed=seed,
    )


def _restored(blob, seed):
    """``("finished", value)`` of the workflow resumed from ``blob`` to its end in a new
    interpreter under that hash seed, or ``("refused", variable, message)``."""
    return resume_in_a_new_interpreter(
        blob, module="tests.workflows.corpus_sets", workflow_type="t", now=0.0, steps=None,
        finish=True, answer="outcome", hash_seed=seed,
    )


def _native(ops, seed):
    """The uninterrupted run, in a process with that hash seed."""
    code = (
        "import pickle, sys\nfrom workflows.testing import WorkflowHarness\n"
        "from tests.workflows.corpus_sets import set_operations\n"
        "h = WorkflowHarness(set_operations, pickle.load(sys.stdin.buffer), native=True)\n"
        "while not h.done:\n    h.send(None)\n"
        "sys.stdout.buffer.write(pickle.dumps(h.value))\n"
    )
    return pickle.loads(in_a_new_interpreter(code, stdin=pickle.dumps(ops), hash_seed=seed))


def _churn(elements):
    ops = [("add", x) for x in elements]
    ops += [("discard", x) for x in elements[1::3]]
    ops += [("pop",), ("await",)]
    ops += [("add", x) for x in reversed(elements)] + [("list",), ("pop",), ("pop",)]
    return ops


def test_int_set_restored_in_another_process_behaves_as_uninterrupted():
    ops = _churn([i * 8 for i in range(20)] + [-1, -2, 3, 11])
    blob = _checkpointed(ops, 1)
    assert _restored(blob, 2) == ("finished", _native(ops, 1))


def test_str_set_restored_in_another_process_exact_under_the_same_hash_seed():
    """Strings hash by the process's seed: under the same PYTHONHASHSEED the restored set is the
    same table; under another it holds the same elements in that process's own order (as two
    native runs would), and the workflow goes on."""
    ops = _churn([f"k{i}" for i in range(30)])
    blob = _checkpointed(ops, 7)
    assert _restored(blob, 7) == ("finished", _native(ops, 7))
    other = _restored(blob, 8)
    assert other[0] == "finished", other
    log, left, size = other[1]
    native_log, native_left, native_size = _native(ops, 7)
    # Before the await the two runs did the same; after it, the same elements in another order
    # (so pop() took others): what was popped and what is left are the same elements in all.
    assert size == native_size
    assert log[: _before_await(ops)] == native_log[: _before_await(ops)]
    assert sorted(left + _popped(log)) == sorted(native_left + _popped(native_log))


def test_loop_over_a_str_set_resumed_under_another_hash_seed_visits_each_element_once():
    """A loop over a set of strings, checkpointed in the middle of the iteration and resumed in
    a process whose strings hash otherwise (the set comes back in that process's order), visits
    every element it had not visited yet exactly once: none twice, none skipped. Under the same
    seed it goes on exactly as the uninterrupted run."""
    elements = sorted(f"k{i}" for i in range(40))
    ops = [("add", x) for x in elements]
    for steps in (0, 9, 25):  # suspended after the 1st, the 10th and the 26th element
        blob = _checkpointed(ops, 7, steps)
        native_log = _native(ops, 7)[0]
        assert _restored(blob, 7)[1][0] == native_log
        for seed in (8, 9):
            kind, (log, left, size) = _restored(blob, seed)
            assert kind == "finished" and size == len(elements) and sorted(left) == elements
            visited = [x for k, x in log if k == "loop"]
            assert visited[: steps + 1] == [x for k, x in native_log if k == "loop"][: steps + 1]
            assert sorted(visited) == elements, (steps, seed, visited)


def _popped(log):
    return [value for kind, value in log if kind == "pop" and value is not None]


def _before_await(ops):
    """How many log entries the operations before the first await make."""
    first = ops.index(("await",))
    return sum(1 for op in ops[:first] if op[0] in ("pop", "list"))


def test_set_restore_failure_in_process_names_the_variable(monkeypatch):
    """The restore's check of the rebuilt table: a record that does not match what is rebuilt
    (here: hashes altered in the bytes) fails the restore naming the variable."""
    ops = _churn([i * 8 for i in range(20)])
    h = WorkflowHarness(set_operations, ops, roundtrip=False)
    while h.command is not None and not str(getattr(h.command, "name", "")).startswith("t"):
        h.send(None)
    real = _settable.Table.from_record

    def tampered(rec):
        size, finger, kinds, hashes, *where = rec  # the same seed and process: just wrong
        return real((size, finger, kinds, bytes(16), *where))

    blob = checkpoint(h.continuation)
    monkeypatch.setattr(_settable.Table, "from_record", staticmethod(tampered))
    with pytest.raises(CheckpointError) as info:
        restore(blob)
    assert info.value.variable == "s" and "cannot be given back" in str(info.value)
