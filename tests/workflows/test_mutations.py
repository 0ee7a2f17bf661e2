"""The differential suite kills deliberately broken lowerings (design §5.1, mutation checks).

Each mutant patches one lowering rule of the compiler while a few corpus workflows are recompiled
from their source under a separate registry key; the differential comparison must then report a
difference for at least one of their cases. The unpatched recompilation must report none, so the
kill is the mutant's doing. The patches reach into the compiler's private emitter: if it is
restructured, update the mutants here (they fail loudly rather than pass silently).
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from workflows._compiler import _lower, _runtime, compile_workflow_source

from .corpus_index import CORPUS
from .diffharness import compare, run_compiled, run_native
from .test_differential import CORPUS_MODULES  # noqa: F401 - loads the corpus

Emitter = _lower.Emitter


def _entry(name: str):
    for e in CORPUS:
        if e.name.endswith(":" + name):
            return e
    raise AssertionError(f"no corpus entry {name}")


def _recompile(name: str, tag: str) -> Any:
    """Compile a corpus workflow's source again, registered under ``mutants.<tag>:<name>``."""
    entry = _entry(name)
    fn = entry.wf.__wrapped__
    src = textwrap.dedent(inspect.getsource(fn))
    src = "\n".join(line for line in src.splitlines() if not line.startswith("@workflow")) + "\n"
    g = dict(sys.modules[fn.__module__].__dict__)
    return compile_workflow_source(src, f"mutant_{tag}_{name}.py", f"mutants.{tag}:{name}", g)


def _differences(names: list[str], tag: str) -> list[str]:
    found = []
    for name in names:
        wf = _recompile(name, tag)
        for i, case in enumerate(_entry(name).cases):
            native = run_native(wf, case.args, case.oracle)
            compiled = run_compiled(wf, case.args, case.oracle, roundtrip=False)
            diffs = compare(native, compiled, with_chain=True)
            if diffs:
                found.append(f"{name}-{i}: {diffs[0]}")
    return found


@contextmanager
def patched(owner: Any, attr: str, make: Callable[[Any], Any]) -> Iterator[None]:
    """Replace ``owner.attr`` by ``make(original)`` for the duration of the block."""
    original = getattr(owner, attr)
    setattr(owner, attr, make(original))
    try:
        yield
    finally:
        setattr(owner, attr, original)


# --- the mutants ---------------------------------------------------------------------------------


def no_sibling_temporaries(original):
    """Earlier siblings of an await are evaluated inline (after it) instead of into temporaries."""

    def ex_generic(self, e):
        e = __import__("copy").copy(e)
        slots = _lower._slots(e)
        last = max(i for i, (get, _, _) in enumerate(slots) if _lower.has_await(get()))
        for i, (get, put, _) in enumerate(slots):
            put(self.expr(get()) if i == last else self.rw(get()) if not _lower.has_await(get()) else self.expr(get()))
        return e

    return ex_generic


def no_early_call_arguments(original):
    """Arguments of a call before an await are evaluated inline (after it), not into temporaries."""

    def _early(self, v):
        return self.expr(v)

    return _early


def unpack_late(original):
    """``*v`` and ``**v`` before a later await are unpacked after it (the reference is kept)."""

    def ex_generic(self, e):
        e = __import__("copy").copy(e)
        slots = _lower._slots(e)
        last = max(i for i, (get, _, _) in enumerate(slots) if _lower.has_await(get()))
        for i, (get, put, _) in enumerate(slots):
            v = get()
            if i < last:
                if not isinstance(v, ast.Constant):
                    put(self.temp(self.expr(v)))
            else:
                put(self.expr(v) if i == last else self.rw(v))
        return e

    return ex_generic


def condition_as_value(original):
    """A condition with awaits is lowered as a value and then tested (``__bool__`` twice)."""

    def branch(self, e, label, when):
        t = self.expr(e)
        test = t if when else ast.UnaryOp(ast.Not(), t)
        self.emit(ast.If(test, [ast.Return(ast.Constant(label))], []))

    return branch


def no_short_circuit(original):
    """and/or with awaits evaluate every operand (lowered like any other node)."""

    def ex_BoolOp(self, e):  # noqa: N802 - the emitter's naming
        return self.ex_generic(e)

    return ex_BoolOp


def augassign_reads_target_late(original):
    """`x op= <await>` reads x after the right side instead of before it."""

    def st_AugAssign(self, s):  # noqa: N802
        if not isinstance(s.target, ast.Name):
            return original(self, s)
        r = self.expr(s.value)
        cur = self.rw(ast.Name(s.target.id, ast.Load()))
        op = _lower._IOPS[type(s.op)]
        self.emit(ast.Assign([self.rw(s.target)], ast.Call(_lower.rt_attr(op), [cur, r], [])))
        return None

    return st_AugAssign


def _filter_leaps(original, keep: Callable[[list[Any]], list[Any]]):
    def leap(self, kind, value, node):
        saved = self.leaps
        self.leaps = keep(list(saved))
        try:
            return original(self, kind, value, node)
        finally:
            self.leaps = saved

    return leap


def leaps_skip_finally(original):
    """break/continue/return leave a try without running its finally."""
    return _filter_leaps(original, lambda leaps: [e for e in leaps if not isinstance(e, _lower.FinallyEntry)])


def leaps_skip_outer_finally(original):
    """A leap runs only the innermost finally it crosses (the spike's double-finally area)."""

    def keep(leaps):
        fins = [i for i, e in enumerate(leaps) if isinstance(e, _lower.FinallyEntry)]
        return [e for i, e in enumerate(leaps) if i not in fins[:-1]]

    return _filter_leaps(original, keep)


def handler_name_kept(original):
    """The implicit `del e` at the end of `except ... as e` is dropped."""

    def unbind(f, name):
        return None

    return unbind


MUTANTS = [
    ("sibling-temporaries", Emitter, "ex_generic", no_sibling_temporaries, ["binop_order"]),
    ("call-argument-temporaries", Emitter, "_early", no_early_call_arguments, ["call_argument_order"]),
    ("unpack-late", Emitter, "ex_generic", unpack_late, ["unpacking_before_a_later_await", "double_star_merging_before_a_later_await"]),
    ("condition-as-value", Emitter, "branch", condition_as_value, ["bool_called_once_per_test"]),
    ("short-circuit", Emitter, "ex_BoolOp", no_short_circuit, ["and_or_short_circuit"]),
    ("augassign-read-order", Emitter, "st_AugAssign", augassign_reads_target_late, ["augassign_name_read_first", "augassign_walrus_visible"]),
    ("finally-skipped", Emitter, "leap", leaps_skip_finally, ["return_through_nested_finally", "break_continue_through_finally"]),
    ("outer-finally-skipped", Emitter, "leap", leaps_skip_outer_finally, ["return_through_nested_finally"]),
    ("handler-name-kept", _runtime, "unbind", handler_name_kept, ["except_name_deleted"]),
]  # fmt: skip


@pytest.mark.parametrize(("label", "owner", "attr", "make", "names"), MUTANTS, ids=[m[0] for m in MUTANTS])
def test_mutant_is_killed(label, owner, attr, make, names):
    """A broken lowering rule makes the differential comparison fail on the corpus."""
    assert not _differences(names, f"clean_{attr}"), "the unmutated recompilation must agree"
    with patched(owner, attr, make):
        killed = _differences(names, f"mutant_{attr}")
    assert killed, f"mutant {label} survived the differential comparison on {names}"
