"""Compiler error paths: checkpoint failures naming the variable, version mismatches, collected
compile errors, closures, missing source."""

from __future__ import annotations

import itertools
import sys
import textwrap
import threading
from typing import Any

import pytest

from workflows import CheckpointError, CompileError, VersionMismatch, timer, workflow
from workflows._compiler import checkpoint, compile_workflow_source, restore, step
from workflows._compiler._checkpoint import MAGIC
from workflows._context import StepContext

_n = 0


def wf_of(src: str, key: str | None = None, filename: str | None = None):
    """Compile the dedented ``src`` (its one async def), optionally under registry key ``key``."""
    global _n
    _n += 1
    src = textwrap.dedent(src).lstrip("\n")
    g: dict[str, Any] = {"timer": timer, "threading": threading, "itertools": itertools}
    return compile_workflow_source(src, filename or f"errs_{_n}.py", key or "wf", g)


def suspended(wf, *args):
    cont = wf.start(*args)
    with StepContext().active():
        step(cont)
    return cont


def test_unpicklable_local_names_variable_type_and_await():
    """A local that cannot be pickled fails the checkpoint naming it, its type and the await line."""
    wf = wf_of("""
    async def wf():
        fh = threading.Lock()
        ok = 1
        await timer("t", 1)
    """, filename="ck_flows.py")
    cont = suspended(wf)
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    err = info.value
    assert err.variable == "fh"
    assert "lock" in err.value_type
    assert err.location == "ck_flows.py:4 await timer('t', 1)"
    assert "'fh'" in str(err) and "ck_flows.py:4" in str(err)


def test_generator_local_says_wrap_it_in_list():
    """A generator live at an await is reported with the hint to wrap it in list(...)."""
    wf = wf_of("""
    async def wf(n):
        gen = (i * 2 for i in range(n))
        await timer("t", 1)
        return list(gen)
    """)
    with pytest.raises(CheckpointError, match=r"wrap it in list\(\.\.\.\)") as info:
        checkpoint(suspended(wf, 3))
    assert info.value.variable == "gen"


def test_for_loop_over_generator_names_the_loop():
    """An unpicklable for-loop iterator is named as the iterator of the loop at its line."""
    wf = wf_of("""
    async def wf(n):
        for i in (j for j in range(n)):
            await timer("t", i)
    """)
    with pytest.raises(CheckpointError) as info:
        checkpoint(suspended(wf, 3))
    assert "for-loop at line 2" in str(info.value)
    assert "list(" in str(info.value)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="itertools pickling is deprecated from 3.12")
def test_itertools_iterator_is_refused_with_a_clear_message():
    """An itertools object live at an await is refused (its pickling is deprecated) with a hint,
    given once."""
    wf = wf_of("""
    async def wf():
        c = itertools.cycle("ab")
        await timer("t", 1)
    """)
    with pytest.raises(CheckpointError, match=r"list\(\.\.\.\)") as info:
        checkpoint(suspended(wf))
    assert str(info.value).count("list(...)") == 1, str(info.value)
    assert str(info.value).count("deprecated") == 1, str(info.value)


def test_version_mismatch_names_both_fingerprints_and_comment_edits_keep_it():
    """A changed workflow refuses an old continuation; a comment-only edit keeps the fingerprint."""
    v1 = wf_of("""
    async def wf(x):
        await timer("t", x)
        return x
    """, key="errs.versioned")
    blob = checkpoint(suspended(v1, 1))
    same = wf_of("""
    async def wf(x):  # a comment
        await timer("t", x)

        return x
    """, key="errs.versioned")
    assert same.fingerprint == v1.fingerprint
    assert restore(blob).workflow_key == "errs.versioned"
    v2 = wf_of("""
    async def wf(x):
        await timer("t", x)
        return x + 1
    """, key="errs.versioned")
    with pytest.raises(VersionMismatch) as info:
        restore(blob)
    assert info.value.stored == v1.fingerprint and info.value.loaded == v2.fingerprint
    assert v1.fingerprint[:12] in str(info.value) and v2.fingerprint[:12] in str(info.value)


def test_python_minor_mismatch_and_malformed_blobs():
    """A checkpoint from another Python minor raises VersionMismatch; garbage raises CheckpointError."""
    wf = wf_of("""
    async def wf():
        await timer("t", 1)
    """)
    blob = checkpoint(suspended(wf))
    other = "3.99"
    here = f"{sys.version_info[0]}.{sys.version_info[1]}"
    forged = blob.replace(f'"python":"{here}"'.encode(), f'"python":"{other}"'.encode())
    n = int.from_bytes(blob[4:8], "big") + len(other) - len(here)
    forged = MAGIC + n.to_bytes(4, "big") + forged[8:]
    with pytest.raises(VersionMismatch, match="3.99"):
        restore(forged)
    with pytest.raises(CheckpointError, match="malformed"):
        restore(b"not a checkpoint")


def test_compile_error_collects_every_problem():
    """Several problems raise one CompileError listing all of them, the first one with a count."""
    src = """
    async def wf(x):
        async with x:
            pass
        y = locals()
        async for i in x:
            pass
    """
    with pytest.raises(CompileError) as info:
        wf_of(src, filename="many.py")
    err = info.value
    assert len(err.problems) == 3
    assert "(and 2 more)" in err.msg
    assert (err.lineno, err.offset) == (2, 5)
    assert [p.lineno for p in err.problems] == [2, 4, 5]
    assert err.filename == "many.py" and err.text.strip() == "async with x:"


def make_closure_workflow(limit):
    @workflow
    async def inner(x):
        await timer("t", 1)
        return x + limit

    return inner


def make_plain_workflow():
    @workflow
    async def plain(x):
        await timer("t", 1)
        return x * 2

    return plain


def test_workflow_closing_over_enclosing_variable_is_rejected():
    """A workflow using a variable of its enclosing function is a CompileError naming it."""
    with pytest.raises(CompileError, match="'limit'") as info:
        make_closure_workflow(3)
    assert info.value.lineno == make_closure_workflow.__code__.co_firstlineno + 4


def test_workflow_defined_inside_a_function_without_closure_works():
    """A workflow defined inside a function that captures nothing compiles and runs."""
    wf = make_plain_workflow()
    cont = restore(checkpoint(suspended(wf, 4)))
    with StepContext().active():
        assert step(cont).value == 8


def test_source_unavailable_is_a_clear_error():
    """A coroutine function whose source cannot be read fails with a message saying what to do."""
    ns: dict[str, Any] = {}
    # A file name of its own: another test's exec under "<string>" may leave its source in linecache
    exec(compile("async def nosrc():\n    pass\n", "<no source here>", "exec"), ns)  # noqa: S102
    with pytest.raises(CompileError, match="source code is not available"):
        workflow(ns["nosrc"])


def _long_sum_workflow(terms: int) -> str:
    total = " + ".join(f"v * {i}" for i in range(terms))
    return f"async def wf(x):\n    v = x\n    await timer('t', 1)\n    return {total}\n"


# Python 3.12's compiler recurses in C under a fixed limit that the code it is handed (deeper
# than the source: the awaits' machinery) reaches past about 450 terms; 3.11 and 3.13 go further.
_TERMS = 400 if sys.version_info[:2] == (3, 12) else 1000


def test_expression_python_compiles_is_compiled_not_a_recursion_error():
    """A long sum compiles natively; the workflow compiler takes it too (it raised RecursionError
    from its AST passes past about 250 terms) and computes the same value."""
    limit = sys.getrecursionlimit()
    wf = wf_of(_long_sum_workflow(_TERMS))
    assert sys.getrecursionlimit() == limit  # the compiler's own limit is not left behind
    cont = wf.start(2)
    with StepContext().active():
        step(cont)
        done = step(cont, None)
    assert done.value == sum(2 * i for i in range(_TERMS))


@pytest.mark.skipif(sys.version_info[:2] != (3, 12), reason="Python 3.12's compiler only")
def test_expression_past_python_3_12s_compiler_is_a_compile_error():
    """On 3.12, a sum that its compiler cannot take in the code the workflow compiler makes is a
    CompileError naming the statement, never a RecursionError."""
    with pytest.raises(CompileError, match=r"line 4 nests expressions \d+ deep.*split it"):
        wf_of(_long_sum_workflow(1000))


def test_expression_too_deep_for_the_compiler_is_a_compile_error(monkeypatch):
    """Past what the compiler's passes can recurse, a CompileError names the statement's line."""
    from workflows._compiler import _workflow

    monkeypatch.setattr(_workflow, "_COMPILE_RECURSION_LIMIT", 1500)
    with pytest.raises(CompileError, match=r"line 4 nests expressions \d+ deep.*split it") as e:
        wf_of(_long_sum_workflow(1000))
    assert e.value.lineno == 4
