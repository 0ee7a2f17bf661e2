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
from workflows._compiler._checkpoint import _read_header
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


# ---------------------------------------------------------------------------------------------
# Liveness does not depend on how a branch is written


@st.composite
def _branch_bodies(draw, in_loop: bool):
    simple = [
        "x{i} = v",
        "log(x{i})",
        "return x{i}",
        "raise ValueError(v)",
        "await timer('b', after=1)",
        "x{i} = await signal('s')",
        "pass",
    ]
    if in_loop:
        simple += ["break", "continue"]
    n = draw(st.integers(1, 3))
    return [draw(st.sampled_from(simple)).format(i=draw(st.integers(0, 2))) for _ in range(n)]


@st.composite
def _chains(draw):
    in_loop = draw(st.booleans())
    n = draw(st.integers(2, 4))
    bodies = [draw(_branch_bodies(in_loop)) for _ in range(n)]
    catch_all = draw(st.booleans())
    tail = [
        draw(st.sampled_from(["x{i} = 1", "log(x{i})", "await signal('after')"])).format(
            i=draw(st.integers(0, 2))
        )
        for _ in range(draw(st.integers(1, 3)))
    ]
    return in_loop, bodies, catch_all, tail


def _render(chain, as_match: bool) -> str:
    in_loop, bodies, catch_all, tail = chain
    ind = "        " if in_loop else "    "
    lines = ["async def w(a):", "    v = await signal('v')"]
    if in_loop:
        lines.append("    for turn in range(2):")
    if as_match:
        lines.append(f"{ind}match v:")
        for i, body in enumerate(bodies):
            last = i == len(bodies) - 1
            lines.append(f"{ind}    case {'_' if last and catch_all else i}:")
            lines += [f"{ind}        {s}" for s in body]
    else:
        for i, body in enumerate(bodies):
            last = i == len(bodies) - 1
            head = "if" if i == 0 else "elif"
            lines.append(f"{ind}else:" if last and catch_all else f"{ind}{head} v == {i}:")
            lines += [f"{ind}    {s}" for s in body]
    lines += [f"{ind}{s}" for s in tail]
    lines.append("    return (a, x0, x1, x2)")
    return "\n".join(lines) + "\n"


def _live_sets(src: str) -> dict[str, frozenset[str] | None]:
    ns = namespace()
    ns.update(signal=workflows.signal, timer=workflows.timer)
    note(src)
    wf = compile_workflow_source(src, "liveness_program.py", "w", ns)
    table = wf._code.table
    return {ident: p.live for ident, p in table.point_by_ident.items()}


@settings(
    max_examples=int(_DEEP) if _DEEP else 150,
    deadline=None,
    derandomize=not _DEEP,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(chain=_chains())
def test_a_match_and_the_same_if_chain_have_the_same_live_locals(chain):
    """A chain of branches written as ``match v: case 0: ... case _:`` and as ``if v == 0: ...
    else:`` (with or without a last branch that takes everything, in a loop or not, with
    branches that return, raise, break, continue or assign): the same locals are live at every
    await, so an edit of one upgrades as the same edit of the other."""
    assert _live_sets(_render(chain, True)) == _live_sets(_render(chain, False))
