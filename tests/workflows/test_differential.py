"""The hand-written corpus, run natively and compiled, must behave identically.

For every corpus case: the native coroutine does what the case says (so the corpus itself is
honest); the compiled machine without checkpoints matches it in commands, per-step log and
effects, and outcome including the exception's cause/context chain; and the compiled machine with
a checkpoint/restore round-trip at every suspension matches it too (the chain is not compared
there: ``__cause__``/``__context__`` do not survive a pickle).
"""

from __future__ import annotations

import importlib
import sys

import pytest

from .corpus_index import CORPUS
from .diffharness import (
    boom,
    compare,
    native_expectation_problem,
    run_compiled,
    run_native,
)

CORPUS_MODULES = [
    "corpus_control",
    "corpus_try",
    "corpus_expr",
    "corpus_calls",
    "corpus_seed",
    "corpus_tricky",
    "corpus_fidelity",
    "corpus_restore",
    "corpus_combos",
    "corpus_mixed",
    "corpus_sharing",
    "corpus_modstate",
    "corpus_coroutines",
    "corpus_unseen",
    "corpus_probe2",
    "corpus_probe3",
    "corpus_probe4",
    "corpus_probe6",
    "corpus_probe6_modstate",
    "corpus_probe7",
    "corpus_probe8",
    "corpus_names",
    "corpus_games",
    "corpus_gameshapes",
    "corpus_cached",
]
if sys.version_info >= (3, 12):
    CORPUS_MODULES.append("corpus_typeparams")  # type parameter syntax

# Imported for their registrations; an import error fails this module (it must never skip).
for _name in CORPUS_MODULES:
    importlib.import_module(f"{__package__}.{_name}")

# Cases whose compiled run is known to differ (compiler bugs reported, not yet fixed), keyed by
# (check, "<entry name>-<case index>" or "<entry name>-derived"). Marked xfail(strict=True), so a
# fix turns them into failures until the mark is removed.
KNOWN_BUGS: dict[tuple[str, str], str] = {
}


def _params(check: str) -> list[object]:
    out = []
    for entry in CORPUS:
        for i, case in enumerate(entry.cases):
            ident = f"{entry.name}-{i}"
            marks = []
            reason = KNOWN_BUGS.get((check, ident))
            if reason:
                marks.append(pytest.mark.xfail(strict=True, reason=f"compiler bug: {reason}"))
            out.append(pytest.param(entry, case, id=ident, marks=marks))
    return out


def _from(module: str) -> list:
    return [e for e in CORPUS if e.wf.__module__.rpartition(".")[2] == module]


def test_corpus_is_large_enough():
    """The corpus has at least 100 workflows and several cases for most of them; corpus_unseen,
    corpus_gameshapes and corpus_probe8 (programs written without looking at the checkpoint's
    code, one input each for the most part) have at least 60, 20 and 50 of their own."""
    unseen = _from("corpus_unseen")
    assert len(unseen) >= 60
    shapes = _from("corpus_gameshapes")
    assert len(shapes) >= 20
    probe8 = _from("corpus_probe8")
    assert len(probe8) >= 50
    rest = [e for e in CORPUS if e not in unseen and e not in shapes and e not in probe8]
    assert len(rest) >= 100
    assert sum(len(e.cases) for e in rest) >= 3 * len(rest)


@pytest.mark.parametrize(("entry", "case"), _params("native"))
def test_native_run_does_what_the_case_says(entry, case):
    """The native coroutine ends as the corpus case declares (return value or exception type)."""
    trace = run_native(entry.wf, case.args, case.oracle)
    problem = native_expectation_problem(case, trace)
    assert problem is None, problem


@pytest.mark.parametrize(("entry", "case"), _params("compiled"))
def test_compiled_matches_native(entry, case):
    """Compiled without checkpoints: same commands, log, effects, outcome and exception chain."""
    native = run_native(entry.wf, case.args, case.oracle)
    compiled = run_compiled(entry.wf, case.args, case.oracle, roundtrip=False)
    diffs = compare(native, compiled, with_chain=True)
    assert not diffs, "\n".join(diffs)


@pytest.mark.parametrize(("entry", "case"), _params("roundtrip"))
def test_compiled_with_checkpoint_roundtrip_matches_native(entry, case):
    """Compiled with restore(checkpoint()) at every suspension: same commands, log, effects, outcome
    and exception chain (attributes, notes and traceback lines included)."""
    native = run_native(entry.wf, case.args, case.oracle)
    compiled = run_compiled(entry.wf, case.args, case.oracle, roundtrip=True)
    diffs = compare(native, compiled, with_chain=True, label="restored")
    assert not diffs, "\n".join(diffs)


def _derived(case, suspensions: int):
    """Oracle variants of a case: Cancelled or a custom error injected at a few suspensions."""
    if case.oracle.cancel_at is not None or case.oracle.fail_at or case.oracle.fail_when:
        return []
    points = sorted({0, suspensions // 2, suspensions - 1} & set(range(suspensions)))
    out = []
    for k in points:
        out.append((f"cancel@{k}", case.oracle.with_(cancel_at=k)))
        out.append((f"boom@{k}", case.oracle.with_(fail_at=frozenset({k}), error=boom)))
    return out


def _entry_params() -> list[object]:
    out = []
    for entry in CORPUS:
        reason = KNOWN_BUGS.get(("derived", f"{entry.name}-derived"))
        marks = [pytest.mark.xfail(strict=True, reason=f"compiler bug: {reason}")] if reason else []
        out.append(pytest.param(entry, id=entry.name, marks=marks))
    return out


@pytest.mark.parametrize("entry", _entry_params())
def test_injected_cancellation_and_errors_match_native(entry):
    """Every case again with Cancelled or a custom error thrown in at its first, middle and last await."""
    diffs = []
    for i, case in enumerate(entry.cases):
        base = run_native(entry.wf, case.args, case.oracle)
        for label, oracle in _derived(case, len(base.commands)):
            native = run_native(entry.wf, case.args, oracle)
            for roundtrip in (False, True):
                compiled = run_compiled(entry.wf, case.args, oracle, roundtrip=roundtrip)
                d = compare(native, compiled, with_chain=True)
                diffs += [f"case {i} {label} roundtrip={roundtrip}: {x}" for x in d]
    assert not diffs, "\n".join(diffs[:10])
