"""Errors the compiled machine raises while running or checkpointing, each saying what and where."""

import pickle
import textwrap

import pytest

from workflows import (
    Cancelled,
    CheckpointError,
    VersionMismatch,
    WorkflowError,
    procedure,
    timer,
    workflow,
)
from workflows._compiler import checkpoint, compile_workflow_source, restore, step
from workflows._context import StepContext
from workflows._step import Finished, Raised, Suspended
from workflows.testing import WorkflowHarness

from .probes import double

HERE = __file__


def _line_of(fn, text: str) -> int:
    import inspect

    lines, start = inspect.getsourcelines(fn.__wrapped__)
    for i, line in enumerate(lines):
        if text in line:
            return start + i
    raise AssertionError(text)


class NotACommand:
    """An awaitable that is not a workflow command."""

    def __await__(self):
        return (yield "not a command")


@workflow
async def awaits_number(x):
    """Awaits a plain int."""
    await timer("first", 1)
    return await x


@workflow
async def awaits_foreign_awaitable_and_catches(x):
    """Awaits a foreign awaitable inside try/except WorkflowError."""
    try:
        await NotACommand()
    except WorkflowError as e:
        return ("caught", str(e))
    return "not raised"


@workflow
async def holds_generator(n):
    """Keeps a generator alive across an await (generators cannot be pickled)."""
    gen = (i for i in range(n))
    await timer("hold", 1)
    return list(gen)


@workflow
async def holds_lock(n):
    """Keeps a lock alive across an await."""
    import threading

    lock = threading.Lock()
    await procedure(double, n)
    return lock.locked()


def test_awaiting_a_non_command_raises_workflow_error_at_that_line():
    """`await 5` raises WorkflowError naming the value and the line, inside the workflow."""
    h = WorkflowHarness(awaits_number, 5, roundtrip=True)
    h.send(None)
    assert h.done
    assert isinstance(h.exception, WorkflowError)
    msg = str(h.exception)
    assert "int" in msg or "5" in msg
    assert str(_line_of(awaits_number, "return await x")) in msg


def test_awaiting_a_non_command_is_catchable():
    """The WorkflowError for a non-command await is raised at the await and can be caught there."""
    h = WorkflowHarness(awaits_foreign_awaitable_and_catches, 1, roundtrip=True)
    assert h.done and h.exception is None
    kind, msg = h.value
    assert kind == "caught" and "NotACommand" in msg


def test_unpicklable_local_fails_checkpoint_naming_variable_type_and_await():
    """A generator live at an await: CheckpointError names the local, its type and the await."""
    cont = holds_generator.start(3)
    with StepContext().active():
        r = step(cont)
    assert isinstance(r, Suspended)
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    err = info.value
    assert err.variable == "gen"
    assert "generator" in str(err.value_type)
    line = _line_of(holds_generator, 'await timer("hold", 1)')
    assert f":{line}" in str(err.location)
    msg = str(err)
    assert "gen" in msg and "generator" in msg and str(line) in msg


def test_unpicklable_local_fails_the_harness_roundtrip():
    """With roundtrip=True the harness surfaces the same CheckpointError at the first suspension."""
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(holds_lock, 1, roundtrip=True)
    assert info.value.variable == "lock"


def test_checkpoint_roundtrip_resumes_where_it_was():
    """restore(checkpoint(c)) resumes at the same await with the same locals."""
    src = """
    async def wf(x):
        a = await timer("one", x)
        b = await timer("two", x + 1)
        return (x, a, b)
    """
    wf = compile_workflow_source(textwrap.dedent(src), "roundtrip_src.py", "roundtrip_wf")
    cont = wf.start(2)
    with StepContext().active():
        assert step(cont) == Suspended(timer("one", 2))
        cont = restore(checkpoint(cont))
        assert cont.location().replace('"', "'") == "roundtrip_src.py:3 await timer('one', x)"
        assert step(cont, send="A") == Suspended(timer("two", 3))
        cont = restore(checkpoint(cont))
        assert step(cont, send="B") == Finished((2, "A", "B"))


def test_restore_with_changed_code_raises_version_mismatch():
    """A continuation restored after its workflow's code changed raises VersionMismatch."""
    v1 = """
    async def wf(x):
        await timer("t", x)
        return x
    """
    v2 = """
    async def wf(x):
        await timer("t", x)
        return x + 1
    """
    wf1 = compile_workflow_source(textwrap.dedent(v1), "versioned.py", "versioned_wf")
    cont = wf1.start(1)
    with StepContext().active():
        step(cont)
    blob = checkpoint(cont)
    fp1 = cont.fingerprint
    wf2 = compile_workflow_source(textwrap.dedent(v2), "versioned.py", "versioned_wf")
    assert wf2.fingerprint != fp1
    with pytest.raises(VersionMismatch) as info:
        restore(blob)
    msg = str(info.value)
    assert fp1[:8] in msg and wf2.fingerprint[:8] in msg


def test_comment_only_change_keeps_the_fingerprint():
    """Comments and formatting do not change a workflow's fingerprint (its AST is the same)."""
    a = "async def wf(x):\n    await timer('t', x)\n    return x\n"
    b = "async def wf(x):  # note\n\n    await timer('t',   x)  # wait\n    return (x)\n"
    fa = compile_workflow_source(a, "fp_a.py", "fp_wf_a").fingerprint
    fb = compile_workflow_source(b, "fp_b.py", "fp_wf_b").fingerprint
    assert fa == fb


def test_malformed_blob_raises_checkpoint_error():
    """restore() of bytes that are not a continuation raises CheckpointError, not a pickle error."""
    with pytest.raises(CheckpointError):
        restore(b"definitely not a continuation")
    with pytest.raises(CheckpointError):
        restore(pickle.dumps({"a": 1}))


def test_cancel_raises_cancelled_at_the_current_await():
    """h.cancel() throws Cancelled(reason) at the current await; finally blocks run."""
    src = """
    async def wf(x):
        try:
            await timer("t", x)
        finally:
            await timer("cleanup", 1)
        return "unreached"
    """
    wf = compile_workflow_source(textwrap.dedent(src), "cancel_src.py", "cancel_wf")
    h = WorkflowHarness(wf, 1)
    h.cancel("stop")
    assert h.command == timer("cleanup", 1)
    h.send(None)
    assert h.done and isinstance(h.exception, Cancelled) and h.exception.reason == "stop"
    assert isinstance(h.exception, BaseException)
    with pytest.raises(Cancelled):
        h.result()


def test_step_returns_raised_for_uncaught_exceptions():
    """step() returns Raised(exception) for an uncaught workflow exception (it does not raise)."""
    src = """
    async def wf(x):
        await timer("t", 1)
        raise KeyError(x)
    """
    wf = compile_workflow_source(textwrap.dedent(src), "raised_src.py", "raised_wf")
    cont = wf.start("k")
    with StepContext().active():
        step(cont)
        r = step(cont, send=None)
    assert isinstance(r, Raised) and isinstance(r.exception, KeyError)
    assert r.exception.args == ("k",)


_LOCK = __import__("threading").Lock()


@workflow
async def _stores_what_cannot_be_stored(kind: str) -> tuple[str, str]:
    from workflows import broadcast, procedure, publish, send, subscribe

    try:
        if kind == "procedure":
            await procedure(double, _LOCK)
        elif kind == "send":
            send("other", "go", _LOCK)
        elif kind == "broadcast":
            broadcast("go", {1, 2})
        elif kind == "subscribe":
            subscribe("go", object())
        else:
            publish("k", _LOCK)
    except TypeError as e:
        return "caught", str(e)
    return "not refused", ""


@pytest.mark.parametrize("kind, says", [
    ("procedure", "procedure(tests.workflows.probes:double)'s arguments cannot be stored"),
    ("send", "send('other', 'go') payload cannot be stored"),
    ("broadcast", "broadcast('go') filter value must be a JSON value"),
    ("subscribe", "subscribe('go') filter value must be a JSON value"),
    ("publish", "publish('k') value cannot be stored"),
])
def test_a_value_a_step_could_not_store_is_refused_at_the_call_where_the_workflow_can_catch_it(kind, says):
    h = WorkflowHarness(_stores_what_cannot_be_stored, kind)
    caught, message = h.result()
    assert caught == "caught" and says in message, message


def test_awaiting_a_command_outside_a_workflow_is_a_clear_workflow_error():
    import asyncio

    from workflows import WorkflowError, timer

    async def plain() -> None:
        await timer("t", after=1)

    with pytest.raises(WorkflowError, match=r"await Timer\(name='t'.*outside a workflow.*system.start"):
        asyncio.run(plain())
