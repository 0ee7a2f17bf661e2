"""Targeted checks of compiler fidelity that the corpus cannot express: modules without a
``__spec__``, and the messages and errors a user sees."""

from __future__ import annotations

import sys
import textwrap
import types
import warnings

import pytest

from workflows import CheckpointError, CompileError, CompileWarning
from workflows._compiler import checkpoint
from workflows.testing import WorkflowHarness


def test_awaiting_with_in_a_module_without_spec_compiles(tmp_path):
    """A module built with types.ModuleType (``__spec__`` None) may hold a with that awaits:
    the compile warning is issued without asking the missing loader for the source line."""
    path = tmp_path / "specless_mod.py"
    path.write_text(textwrap.dedent("""
        from workflows import timer, workflow

        class Res:
            def __enter__(self):
                return self
            def __exit__(self, *exc):
                return False

        @workflow
        async def wf(x):
            with Res():
                await timer("t", 1)
            return x
    """))
    mod = types.ModuleType("specless_mod")
    assert mod.__spec__ is None
    sys.modules["specless_mod"] = mod
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)  # noqa: S102
        assert any(issubclass(w.category, CompileWarning) and w.lineno == 12 for w in caught)
        h = WorkflowHarness(mod.wf, 5)
        h.send(None)
        assert h.done and h.value == 5
    finally:
        del sys.modules["specless_mod"]


# --- messages ----------------------------------------------------------------------------------


def _src_wf(src: str, filename: str, extra: dict | None = None):
    import threading
    from contextlib import contextmanager

    from workflows import procedure, timer
    from workflows._compiler import compile_workflow_source

    from .probes import double

    g = {"timer": timer, "procedure": procedure, "double": double, "threading": threading,
         "contextmanager": contextmanager}
    g.update(extra or {})
    return compile_workflow_source(textwrap.dedent(src).lstrip("\n"), filename, "wf", g)


def _suspended(wf, *args, sends=0):
    from workflows._compiler import step
    from workflows._context import StepContext

    cont = wf.start(*args)
    with StepContext().active():
        step(cont)
        for _ in range(sends):
            step(cont, 1)
    return cont


def test_messages_about_a_lowered_comprehension_name_the_users_code():
    """An await inside a lowered comprehension is shown with the user's names, its variable and
    iterator are called what they are, and nothing internal (``_af_``) shows."""
    wf = _src_wf("""
    async def wf(n):
        out = [await procedure(double, 1) for v in map(mk, range(n))]
        return out
    """, "msg_comp.py", {"mk": make_lock})
    cont = _suspended(wf, 2)
    assert cont.location() == "msg_comp.py:2 await procedure(double, 1)"
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    err = info.value
    text = str(err)
    assert "_af_" not in text and "internal slot" not in text, text
    assert err.location == "msg_comp.py:2 await procedure(double, 1)"
    for key in cont._frames[0].__dict__:
        assert "_af_" not in cont._frames[0]._af_code.describe_slot(key), key

    named = _src_wf("""
    async def wf(xs):
        return [await procedure(double, v) for v in xs]
    """, "msg_comp_text.py")
    assert _suspended(named, [1]).location() == "msg_comp_text.py:2 await procedure(double, v)"
    assert err.variable == "v"
    assert "the variable 'v' of the list comprehension at line 2" in text

    gen = _src_wf("""
    async def wf(n):
        return [await timer("t", i) for i in (j for j in range(n))]
    """, "msg_comp_iter.py")
    with pytest.raises(CheckpointError) as info:
        checkpoint(_suspended(gen, 3))
    text = str(info.value)
    assert "the iterator of the list comprehension at line 2" in text, text
    assert "for-loop" not in text and "_af_" not in text
    assert info.value.variable is None


def test_contextmanager_open_across_an_await_gets_a_context_manager_hint():
    """A @contextmanager's manager held across an await is refused with a hint about context
    managers, not the generator hint 'wrap it in list(...)'."""
    with pytest.warns(CompileWarning, match="stays open across an await"):
        wf = _src_wf("""
        @contextmanager
        def held():
            yield 1

        async def wf():
            with held():
                await timer("t", 1)
        """, "msg_cm.py")
    with pytest.raises(CheckpointError) as info:
        checkpoint(_suspended(wf))
    text = str(info.value)
    assert "list(" not in text, text
    assert "context manager" in text and "@contextmanager" in text
    assert "_af_" not in text


def make_lock(_):
    """A module-level maker of unpicklable values (a map over it pickles by reference)."""
    import threading

    return threading.Lock()


def _exec_module(tmp_path, name: str, src: str) -> types.ModuleType:
    path = tmp_path / f"{name}.py"
    path.write_text(textwrap.dedent(src).lstrip("\n"))
    mod = types.ModuleType(name)
    mod.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)  # noqa: S102
    return mod


def test_a_command_built_and_not_awaited_is_a_compile_error(tmp_path):
    """``timer("t", 1)`` (or a @workflow call) on its own line does nothing: CompileError at
    decoration time, at that line, saying to add ``await``; a local of that name is not flagged."""
    with pytest.raises(CompileError) as info:
        _exec_module(tmp_path, "bare_cmds", """
            import workflows as wfs
            from workflows import procedure, timer, workflow

            def fetch(n):
                return n

            @workflow
            async def helper(n):
                return n

            @workflow
            async def wf(x):
                timer("t", 1)
                await timer("ok", 1)
                wfs.signal("go")
                helper(x)
                return x
        """)
    err = info.value
    assert err.filename.endswith("bare_cmds.py") and err.lineno == 13
    assert "write 'await timer('t', 1)'" in err.msg and "(and 2 more)" in err.msg
    msgs = [p.msg for p in err.problems]
    assert [p.lineno for p in err.problems] == [13, 15, 16]
    assert "write 'await wfs.signal('go')'" in msgs[1]
    assert "calls the workflow helper without running it" in msgs[2] and "spawn(helper" in msgs[2]

    mod = _exec_module(tmp_path, "bare_ok", """
        from workflows import timer, workflow

        def log(x):
            return x

        @workflow
        async def wf(x):
            log(x)
            timer = log
            timer("not a command")
            return x
    """)
    h = WorkflowHarness(mod.wf, 3)
    assert h.done and h.value == 3


def test_async_generator_decorated_is_a_compile_error_at_its_yield(tmp_path):
    """``@workflow`` on an ``async def`` with ``yield``: a CompileError naming the file and the
    yield's line, saying what to write instead (it was a TypeError)."""
    with pytest.raises(CompileError) as info:
        _exec_module(tmp_path, "agen_mod", """
            from workflows import timer, workflow

            @workflow
            async def wf(n):
                for i in range(n):
                    await timer("t", i)
                    yield i
        """)
    err = info.value
    assert err.filename.endswith("agen_mod.py") and err.lineno == 7
    assert "async generator" in err.msg and "collect results in a list and return it" in err.msg
