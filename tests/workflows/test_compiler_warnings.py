"""CompileWarning at decoration time: a ``with`` whose body awaits, and writes to ``global`` names."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import pytest

import workflows
from workflows import CompileWarning, timer
from workflows._compiler import compile_workflow_source
from workflows.testing import WorkflowHarness

_n = 0


class Manager:
    """A picklable context manager that records its exits in a module list."""

    def __enter__(self) -> Manager:
        return self

    def __exit__(self, *exc: Any) -> None:
        EXITS.append(exc[0])


EXITS: list[Any] = []


def compile_recording(
    src: str, names: dict[str, Any] | None = None
) -> tuple[Any, list[warnings.WarningMessage], str]:
    """Compile the dedented ``src`` under a fresh file name (its module's globals given
    ``names`` too); return it, its warnings and the name."""
    global _n
    _n += 1
    filename = f"warn_flows_{_n}.py"
    g: dict[str, Any] = {"timer": timer, "Manager": Manager, "__name__": f"warn_flows_{_n}"}
    g.update(names or {})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wf = compile_workflow_source(textwrap.dedent(src).lstrip("\n"), filename, "wf", g)
    return wf, [w for w in caught if issubclass(w.category, CompileWarning)], filename


def test_compile_warning_is_public_user_warning():
    """CompileWarning is exported by workflows (in __all__) and is a UserWarning."""
    assert "CompileWarning" in workflows.__all__
    assert issubclass(workflows.CompileWarning, UserWarning)


def test_with_body_awaiting_warns_at_the_with_line():
    """A with whose body awaits warns once, at the with's file and line, naming the manager."""
    _, ws, filename = compile_recording("""
    async def wf(x):
        y = x + 1
        with Manager() as m:
            await timer("t", 1)
        return y
    """)
    assert len(ws) == 1
    w = ws[0]
    assert (w.filename, w.lineno) == (filename, 3)
    assert "Manager()" in str(w.message) and "pickle" in str(w.message)


def test_nested_withs_awaiting_warn_each():
    """Each with that stays open across an await warns, in source order."""
    _, ws, _ = compile_recording("""
    async def wf():
        with Manager():
            with Manager(), Manager():
                await timer("t", 1)
        with Manager():
            pass
    """)
    assert [w.lineno for w in ws] == [2, 3]
    assert "Manager(), Manager()" in str(ws[1].message)


def test_with_without_await_in_body_does_not_warn():
    """A with that awaits only in its manager expression, or not at all, does not warn."""
    _, ws, _ = compile_recording("""
    async def wf():
        with Manager() if await timer("t", 1) is None else Manager():
            x = 1
        with Manager():
            x = 2
        return x
    """)
    assert ws == []


def test_with_inside_nested_function_does_not_warn():
    """A with in a nested function is not workflow code and does not warn. (A nested async def
    is a CompileError of its own: see test_rejections.)"""
    _, ws, _ = compile_recording("""
    async def wf():
        def sync():
            with Manager():
                return 1
        await timer("t", 1)
        return sync()
    """)
    assert ws == []


def test_global_write_warns_at_the_first_write():
    """Writing a declared global warns once per name, at its first write, naming the declaration."""
    _, ws, filename = compile_recording("""
    async def wf(x):
        global COUNT, SEEN
        print(SEEN)
        await timer("t", 1)
        COUNT = x
        COUNT += 1
        return COUNT
    """)
    assert len(ws) == 1
    w = ws[0]
    assert (w.filename, w.lineno) == (filename, 5)
    msg = str(w.message)
    assert "'COUNT'" in msg and "line 2" in msg and "does not keep the global" in msg and "a workflow variable" in msg


def test_every_kind_of_global_write_warns():
    """Augmented assignment, del, for targets, imports and defs of a global name all warn."""
    _, ws, _ = compile_recording("""
    async def wf():
        global A, B, C, D, E
        A += 1
        del B
        for C in range(2):
            pass
        import os as D
        def E():
            return 1
        await timer("t", 1)
    """)
    assert [(w.lineno, str(w.message).split("'")[1]) for w in ws] == [
        (3, "A"), (4, "B"), (5, "C"), (7, "D"), (8, "E"),
    ]


def test_global_read_only_or_nested_does_not_warn():
    """Reading a global, or a nested function's own global write, does not warn."""
    _, ws, _ = compile_recording("""
    async def wf():
        global LIMIT
        def bump():
            global OTHER
            OTHER = 1
        await timer("t", LIMIT)
        return LIMIT
    """)
    assert ws == []


def test_warned_workflow_still_runs():
    """A workflow that earned a warning compiles and runs like its native coroutine."""
    EXITS.clear()
    wf, ws, _ = compile_recording("""
    async def wf(x):
        with Manager():
            v = await timer("t", 1)
        return x if v is None else v
    """)
    assert len(ws) == 1
    h = WorkflowHarness(wf, 3)
    h.send(None)
    assert h.result() == 3 and EXITS == [None]


def test_warning_as_error_fails_decoration():
    """With CompileWarning turned into an error, decoration raises it instead of compiling."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompileWarning)
        with pytest.raises(CompileWarning, match="stays open across an await"):
            compile_workflow_source(
                "async def wf():\n    with Manager():\n        await timer('t', 1)\n",
                "warn_error_flows.py",
                "wf",
                {"timer": timer, "Manager": Manager, "__name__": "warn_error_flows"},
            )


def test_a_workflow_of_main_warns_once_to_move_it_to_a_module():
    """@workflow on a function of the __main__ script warns at its def, saying under which key it
    is stored and to move it to a module; once, however often it is compiled; a workflow of a
    module, or one of __main__ given a name of its own, does not warn."""
    src = textwrap.dedent("""
    async def in_main(x):
        await timer("t", 1)
        return x
    """).lstrip("\n")
    g: dict[str, Any] = {"timer": timer, "__name__": "__main__"}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("default")  # Python's own: each message at each place once
        compile_workflow_source(src, "main_script.py", "in_main", g)
        compile_workflow_source(src, "main_script.py", "in_main", g)
    ws = [w for w in caught if issubclass(w.category, CompileWarning)]
    assert len(ws) == 1, [str(w.message) for w in ws]
    assert (ws[0].filename, ws[0].lineno) == ("main_script.py", 1)
    text = str(ws[0].message)
    assert text.startswith("workflow __main__:in_main: defined in the __main__ script")
    assert "move it to a module of its own" in text and '@workflow(name="app.in_main")' in text

    _, ws, _ = compile_recording("""
    async def wf(x):
        await timer("t", 1)
        return x
    """)
    assert ws == []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        compile_workflow_source(src, "main_named.py", "app.in_main", {"timer": timer, "__name__": "__main__"})
    assert [w for w in caught if issubclass(w.category, CompileWarning)] == []


def test_a_script_defining_a_workflow_warns_on_stderr(tmp_path):
    """Run as a script, as a user would: the warning is on stderr once, at the def's line."""
    script = tmp_path / "script.py"
    script.write_text(
        "from workflows import workflow, timer\n\n\n@workflow\nasync def in_main(x):\n"
        "    await timer('t', 1)\n    return x\n"
    )
    root = str(pathlib.Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": root}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("CompileWarning: workflow __main__:in_main: defined in the __main__ script") == 1, out.stderr
    assert f"{script}:5:" in out.stderr, out.stderr


def test_a_module_run_with_dash_m_warns_too(tmp_path):
    """``python -m pkg.mod`` runs pkg.mod as __main__ with a loader that cannot read __main__'s
    source: the warning is issued all the same (from the lines the compiler read)."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(
        "from workflows import workflow, timer\n\n\n@workflow\nasync def in_main(x):\n"
        "    await timer('t', 1)\n    return x\n"
    )
    root = str(pathlib.Path(__file__).resolve().parents[2])
    out = subprocess.run([sys.executable, "-m", "pkg.mod"], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": f"{root}:{tmp_path}"}, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("CompileWarning: workflow __main__:in_main: defined in the __main__ script") == 1, out.stderr


def test_seeding_the_random_module_warns_at_the_call():
    """``random.seed(...)`` (or ``setstate``, or ``seed`` imported from random) in a workflow
    warns at its line: the module's shared generator is the process's, so a restore in a new
    process draws another sequence. A generator of the workflow's own does not warn."""
    import random

    wf, ws, filename = compile_recording(
        """
    async def wf(x):
        rnd.seed(x)
        a = rnd.random()
        await timer("t", 1)
        reseed(a)
        rng = rnd.Random(x)
        rng.seed(2)
        rnd.Random(3).seed(4)
        def helper(random):
            random.seed(5)
        return a, rng.random()
    """,
        {"rnd": random, "reseed": random.seed},
    )
    assert [(w.filename, w.lineno) for w in ws] == [(filename, 2), (filename, 5)]
    msg = str(ws[0].message)
    assert "rnd.seed()" in msg and "random.Random(seed)" in msg and "new process" in msg
    assert "reseed()" in str(ws[1].message)
