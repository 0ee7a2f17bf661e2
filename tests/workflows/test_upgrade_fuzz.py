"""Random programs (the compiler's fuzz corpus) moved onto other code at every suspension.

Each generated program gets a twin whose code differs only by a statement near its start that
awaits in a comprehension over nothing (so it never suspends). The twin's fingerprint differs,
and every construct after the block has another uid in the compiler (its loops' iterators, its
``try`` and ``with`` slots, its temporaries are all renamed), but the two behave the same. The
program is run with a checkpoint after every suspension, and each checkpoint is restored under
the *other* version, so a run alternates between them at every step: it must move every time
(only a ``finally`` running a ``return`` or ``break``, which is never moved, may stay on its own
code) and do exactly what the native coroutine does.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

import workflows.testing
from workflows import VersionMismatch
from workflows._compiler import compile_workflow_source, restore, restore_upgrading
from workflows._compiler._runtime import _read_header
from workflows._registry import register

from .diffharness import Oracle, compare, run_compiled, run_native
from .programs import Program, namespace, programs

_DEEP = os.environ.get("ACTORFLOW_FUZZ_EXAMPLES")
# The fast tier runs a sample of generated programs; the slow tier (pytest -m slow) all of them.
FAST, FULL = 16, 80
FUZZ = settings(
    max_examples=int(_DEEP) if _DEEP else FULL,
    deadline=None,
    derandomize=not _DEEP,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    print_blob=True,
)
# On the line of an existing statement, so that every line number stays: a comprehension that
# awaits is lowered into a loop (two uids), and this one iterates over nothing.
FIRST = "    G = 0\n"
NEVER = "    G = 0; never_zz = [await signal('never') for never_q in ()]\n"


def _twins(prog: Program):
    src = prog.source()
    assert src.count(FIRST) == 1
    twin = src.replace(FIRST, NEVER)
    note(src)
    # One module for both, as after a deploy: module globals are the module's, not the code's.
    ns = namespace()
    b = compile_workflow_source(twin, "fuzz_program.py", "wf", ns)
    a = compile_workflow_source(src, "fuzz_program.py", "wf", ns)
    assert a.__workflow_key__ == b.__workflow_key__ and a.fingerprint != b.fingerprint
    return a, b


@settings(FUZZ, max_examples=int(_DEEP) if _DEEP else FAST)
@given(prog=programs(), x=st.sampled_from([0, 1, 2, 5, -1]))
def test_generated_programs_run_the_same_moved_onto_other_code_at_every_step(prog, x):
    """A sample of generated programs, each moved onto a twin of its code at every step."""
    _moved_at_every_step(prog, x)


@pytest.mark.slow
@pytest.mark.timeout(1200)
@FUZZ
@given(prog=programs(), x=st.sampled_from([0, 1, 2, 5, -1]))
def test_all_generated_programs_run_the_same_moved_onto_other_code_at_every_step(prog, x):
    """Every generated program of the full run, each moved onto a twin of its code at every step."""
    _moved_at_every_step(prog, x)


def _moved_at_every_step(prog, x):
    a, b = _twins(prog)
    other = {a.fingerprint: b, b.fingerprint: a}
    mine = {a.fingerprint: a, b.fingerprint: b}
    key = a.__workflow_key__
    counts = {"moved": 0, "kept": 0}

    def restore_on_the_other_version(blob: bytes):
        stored = _read_header(blob)[0]["fingerprint"]
        register("workflow", other[stored], key)
        try:
            cont, up = restore_upgrading(blob)
        except VersionMismatch as e:
            assert e.reasons and all("inside a finally block run by a" in r for r in e.reasons), str(e)
            register("workflow", mine[stored], key)
            counts["kept"] += 1
            return restore(blob)
        assert up is not None and up.possible
        counts["moved"] += 1
        return cont

    patch = pytest.MonkeyPatch()
    patch.setattr(workflows.testing, "restore", restore_on_the_other_version)
    try:
        register("workflow", a, key)
        oracle = Oracle(limit=120)
        native = run_native(a, (x,), oracle)
        assert native.failure is None, native.failure
        register("workflow", a, key)
        compiled = run_compiled(a, (x,), oracle, roundtrip=True)
        diffs = compare(native, compiled, with_chain=True)
        assert not diffs, f"x={x}\n" + "\n".join(diffs)
    finally:
        patch.undo()
    if len(compiled.steps) > 1:
        assert counts["moved"] + counts["kept"] >= 1
