"""Inline calls of ``@workflow`` functions behave as the coroutines a plain ``async def`` makes.

The differential corpus runs a workflow natively with its inline helpers still decorated (their
calls are ``SubCall`` objects, awaited through ``SubCall.__await__``). Here the same programs
also run with every helper replaced by its plain ``async def``, which is what CPython itself
does with the source; the three runs (plain CPython, decorated natively, compiled with and
without a checkpoint at every await) must agree, warnings included.
"""

from __future__ import annotations

import gc
import warnings

import pytest

from workflows import WorkflowFunction, workflow
from workflows._compiler import checkpoint, restore
from workflows._compiler._driver import step

from . import corpus_coroutines
from .corpus_index import CORPUS
from .diffharness import Trace, compare, run_compiled, run_native

ENTRIES = [e for e in CORPUS if e.wf.__module__ == corpus_coroutines.__name__]


def _plain_cpython(entry, case, monkeypatch) -> Trace:
    """The native run with the module's ``@workflow`` helpers as their plain ``async def``."""
    g = entry.wf.__wrapped__.__globals__
    for name, value in list(g.items()):
        if isinstance(value, WorkflowFunction) and value is not entry.wf:
            monkeypatch.setitem(g, name, value.__wrapped__)
    try:
        return run_native(entry.wf, case.args, case.oracle)
    finally:
        monkeypatch.undo()


def _warned(run) -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        gc.collect()  # what earlier tests left to collect warns outside this count
    # What is left is the test process's own (modules, other tests' fixtures): the collections
    # below need not walk it again, which in a full run's heap costs seconds per test.
    gc.freeze()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
        gc.collect()
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def test_the_corpus_has_entries():
    """The coroutine corpus registered its programs (a failed import would leave none)."""
    assert len(ENTRIES) >= 8


@pytest.mark.parametrize(
    ("entry", "case"),
    [pytest.param(e, c, id=f"{e.name}-{i}") for e in ENTRIES for i, c in enumerate(e.cases)],
)
def test_plain_cpython_decorated_and_compiled_agree(entry, case, monkeypatch):
    """Plain CPython, the decorated native run and the compiled runs: the same steps, outcome
    and exception chain, and the same 'never awaited' warnings."""
    plain: list[Trace] = []
    warned_plain = _warned(lambda: plain.append(_plain_cpython(entry, case, monkeypatch)))
    native: list[Trace] = []
    warned_native = _warned(lambda: native.append(run_native(entry.wf, case.args, case.oracle)))
    diffs = compare(plain[0], native[0], with_chain=True, label="decorated")
    assert not diffs, "\n".join(diffs)
    assert warned_native == warned_plain
    for roundtrip in (False, True):
        compiled: list[Trace] = []

        def run(rt: bool = roundtrip, out: list[Trace] = compiled) -> None:
            out.append(run_compiled(entry.wf, case.args, case.oracle, roundtrip=rt))

        warned = _warned(run)
        diffs = compare(plain[0], compiled[0], with_chain=True)
        assert not diffs, f"roundtrip={roundtrip}\n" + "\n".join(diffs)
        assert warned == warned_plain, f"roundtrip={roundtrip}"


@workflow
async def _helper(x):
    return x


@workflow
async def _holds_a_call(x):
    from workflows import timer

    c = _helper(x)
    await timer("t", 1)
    return await c


def test_a_checkpointed_call_warns_once_from_the_copy_that_is_dropped():
    """The call saved in a checkpoint belongs to the restored continuation: dropping the old
    continuation does not warn, dropping the restored one unawaited does (once)."""

    def run() -> None:
        cont = _holds_a_call.start(1)
        step(cont)
        blob = checkpoint(cont)
        del cont
        gc.collect()
        restored = restore(blob)
        del restored

    assert _warned(run) == ["coroutine '_helper' was never awaited"]


def test_a_call_binds_its_arguments_at_the_call():
    """``wf(bad args)`` raises the native TypeError at once, with the function's name."""
    with pytest.raises(
        TypeError, match=r"_helper\(\) takes 1 positional argument but 2 were given"
    ):
        _helper(1, 2)


def test_close_and_await_after_close():
    """``close()`` of a call not awaited yet: awaiting it then raises the native RuntimeError."""
    c = _helper(1)
    c.close()
    with pytest.raises(RuntimeError, match="cannot reuse already awaited coroutine"):
        c.__await__().send(None)
    assert _warned(lambda: _helper(2).close()) == []
