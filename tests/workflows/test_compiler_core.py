"""Targeted tests of the compiler's tricky parts: finally routes, handlers, exception context,
unbound locals, tracebacks, sub-workflow frames, cancellation, cached verbatim runs."""

from __future__ import annotations

import copy
import sys
import textwrap
import traceback
from typing import Any

import pytest

from workflows import Cancelled, WorkflowError, signal, timer
from workflows._compiler import compile_workflow_source, step
from workflows._context import StepContext
from workflows._step import Finished, Raised, Suspended
from workflows.testing import WorkflowHarness

_n = 0


def wf_of(src: str, name: str = "wf", filename: str | None = None, extra: dict[str, Any] | None = None):
    """Compile the dedented ``src`` under a unique file name."""
    global _n
    _n += 1
    g: dict[str, Any] = {"timer": timer, "signal": signal, "Cancelled": Cancelled, "sys": sys}
    g.update(extra or {})
    return compile_workflow_source(
        textwrap.dedent(src).lstrip("\n"), filename or f"core_{_n}.py", name, g
    )


def run(wf, *args, reply=lambda cmd: getattr(cmd, "name", None), native=False, roundtrip=True,
        throw_at: dict[int, BaseException] | None = None):
    """Drive ``wf`` to the end; returns (outcome, commands). Outcome: ('ok', v) or ('exc', e)."""
    h = WorkflowHarness(wf, *args, native=native, roundtrip=roundtrip)
    i = 0
    while not h.done and i < 200:
        if throw_at and i in throw_at:
            h.throw(throw_at[i])
        else:
            h.send(reply(h.command))
        i += 1
    names = [getattr(c, "name", None) for c in h.commands]
    if h.exception is not None:
        return ("exc", type(h.exception), str(h.exception)), names
    return ("ok", h.value), names


def same(wf, *args, **kw):
    """The compiled run (restored at every await, and not) matches the native run."""
    native = run(wf, *copy.deepcopy(args), native=True, **kw)
    assert run(wf, *copy.deepcopy(args), roundtrip=False, **kw) == native
    assert run(wf, *copy.deepcopy(args), roundtrip=True, **kw) == native
    return native


def test_return_through_two_exploded_finally_blocks_runs_each_once():
    """A return crossing two finally blocks that await runs each finally exactly once, in order."""
    wf = wf_of("""
    async def wf(log):
        try:
            try:
                await timer("a", 1)
                return log
            finally:
                log.append("inner")
                await timer("b", 1)
        finally:
            log.append("outer")
            await timer("c", 1)
    """)
    out, cmds = same(wf, [])
    assert out == ("ok", ["inner", "outer"])
    assert cmds == ["a", "b", "c"]


def test_break_in_finally_swallows_return_and_continue_routes_through_finally():
    """break inside a finally discards a pending return; continue runs the finally each turn."""
    wf = wf_of("""
    async def wf(n):
        seen = []
        for i in range(n):
            try:
                if i % 2:
                    continue
                await timer(f"t{i}", 1)
            finally:
                seen.append(i)
                await timer(f"f{i}", 1)
        while True:
            try:
                return "lost"
            finally:
                await timer("w", 1)
                break
        return seen
    """)
    out, cmds = same(wf, 4)
    assert out == ("ok", [0, 1, 2, 3])
    assert cmds == ["t0", "f0", "f1", "t2", "f2", "f3", "w"]


def test_handler_as_name_is_unbound_after_the_handler_and_errors_reach_outer_handler():
    """`except E as e` deletes e on exit; an error raised in an awaiting handler reaches the outer one."""
    wf = wf_of("""
    async def wf():
        try:
            try:
                raise KeyError("k")
            except KeyError as e:
                await timer("h", 1)
                raise ValueError(str(e))
        except ValueError as v:
            msg = str(v)
            await timer("o", 1)
        try:
            e
        except NameError as ne:
            return msg, type(ne).__name__
    """)
    out, _ = same(wf)
    assert out == ("ok", ("'k'", "UnboundLocalError"))


def test_exception_context_and_bare_raise_after_await_in_handler():
    """After an await inside a handler, a new error gets __context__ and bare raise re-raises."""
    wf = wf_of("""
    async def wf(mode):
        try:
            raise KeyError("first")
        except KeyError:
            await timer("h", 1)
            if mode == "bare":
                raise
            if mode == "info":
                return type(sys.exc_info()[1]).__name__
            raise ValueError("second")
    """)
    for roundtrip in (False,):
        h = WorkflowHarness(wf, "new", roundtrip=roundtrip)
        h.send(None)
        assert isinstance(h.exception, ValueError)
        assert isinstance(h.exception.__context__, KeyError)
    assert same(wf, "bare")[0][:2] == ("exc", KeyError)
    assert same(wf, "info")[0] == ("ok", "KeyError")


def test_thrown_exception_inside_handler_gets_context():
    """An exception thrown in at an await inside a handler chains to the handled exception."""
    wf = wf_of("""
    async def wf():
        try:
            raise KeyError("first")
        except KeyError:
            await timer("h", 1)
    """)
    for native in (True, False):
        h = WorkflowHarness(wf, native=native, roundtrip=False)
        h.throw(ValueError("thrown"))
        assert isinstance(h.exception, ValueError)
        assert isinstance(h.exception.__context__, KeyError)


def test_unbound_local_raises_native_unbound_local_error():
    """Reading a local that was never assigned raises UnboundLocalError, in plain and loop code."""
    wf = wf_of("""
    async def wf(flag):
        if flag:
            x = 1
        await timer("t", 1)
        if flag == 2:
            total = 0
            for i in range(3):
                total += y
            y = 1
        return x
    """)
    out, _ = same(wf, 0)
    assert out[:2] == ("exc", UnboundLocalError)
    assert "'x'" in out[2]
    out, _ = same(wf, 2)
    assert out[:2] == ("exc", UnboundLocalError) and "'y'" in out[2]
    assert same(wf, 1)[0] == ("ok", 1)


def test_traceback_points_at_user_file_line_and_function():
    """A workflow error's traceback shows the user's file, line and function name, no driver frames."""
    wf = wf_of("""
    async def boom(x):
        await timer("t", 1)
        y = x + 1
        return {}["missing" + str(y)]
    """, name="boom", filename="tb_flows.py")
    h = WorkflowHarness(wf, 1, roundtrip=True)
    h.send(None)
    frames = traceback.extract_tb(h.exception.__traceback__)
    assert frames[-1].filename == "tb_flows.py"
    assert frames[-1].lineno == 4
    assert frames[-1].name == "boom"
    assert "missing" in (frames[-1].line or "")
    assert all("_compiler" not in f.filename for f in frames)


async def plain_coroutine_function():
    return 1


def test_awaiting_a_non_command_raises_catchable_workflow_error_naming_line():
    """Awaiting something that is not a command (a plain coroutine) raises WorkflowError at that
    line, catchable."""
    wf = wf_of("""
    async def wf():
        try:
            await helper()
        except WorkflowError as e:
            msg = str(e)
        await timer("after", 1)
        return msg
    """, filename="await_flows.py", extra={"WorkflowError": WorkflowError, "helper": plain_coroutine_function})
    out, cmds = run(wf)
    assert out[0] == "ok"
    assert "coroutine" in out[1] and "plain_coroutine_function" in out[1] and "await_flows.py:3" in out[1]
    assert cmds == ["after"]


def test_sub_workflow_runs_inline_on_a_frame_stack_across_checkpoints():
    """`await helper(x)` runs the helper inline; its awaits, result and errors reach the caller."""
    helper = wf_of("""
    async def helper(n):
        a = await signal("h1")
        if n < 0:
            raise ValueError(n)
        return n + a
    """, name="helper")
    caller = wf_of("""
    async def caller(n):
        x = await helper(n)
        try:
            await helper(-1)
        except ValueError as e:
            x += e.args[0]
        return x
    """, name="caller", extra={"helper": helper})
    out, cmds = same(caller, 5, reply=lambda c: 10)
    assert out == ("ok", 14)
    assert cmds == ["h1", "h1"]
    h = WorkflowHarness(caller, 5)
    assert h.continuation.location().endswith("await signal('h1')")
    assert len(h.continuation._frames) == 2


def test_cancellation_runs_awaiting_finally_and_except_cancelled():
    """Cancelled thrown at an await runs except Cancelled and a finally that awaits."""
    wf = wf_of("""
    async def wf():
        log = []
        try:
            try:
                await signal("never")
            except Cancelled as c:
                log.append(str(c))
                await timer("compensate", 1)
                raise
        finally:
            await timer("unlock", 1)
            log.append("unlocked")
        return log
    """)
    out, cmds = same(wf, throw_at={0: Cancelled("stop")})
    assert out[:2] == ("exc", Cancelled)
    assert cmds == ["never", "compensate", "unlock"]


@pytest.mark.filterwarnings("ignore::workflows.CompileWarning")  # expected: tested for itself elsewhere
def test_with_exit_runs_on_break_return_and_exception():
    """A sync `with` whose body awaits calls __exit__ on break, return and a thrown exception."""
    src = """
    class CM:
        def __init__(self, log, name):
            self.log, self.name = log, name
        def __enter__(self):
            self.log.append("enter " + self.name)
            return self.name
        def __exit__(self, t, e, tb):
            self.log.append(f"exit {self.name} {t.__name__ if t else None}")
            return t is KeyError

    async def wf(log):
        for i in range(3):
            with CM(log, f"loop{i}") as n:
                await timer(n, 1)
                if i == 1:
                    break
        with CM(log, "swallow"):
            await timer("s", 1)
            raise KeyError("x")
        with CM(log, "ret") as r:
            await timer(r, 1)
            return log
    """
    g: dict[str, Any] = {"timer": timer, "__name__": "core_with_mod"}
    wf = compile_workflow_source(textwrap.dedent(src).lstrip("\n"), "core_with.py", "wf", g)
    sys.modules["core_with_mod"] = type(sys)("core_with_mod")
    sys.modules["core_with_mod"].CM = g["CM"]
    out, cmds = same(wf, [])
    assert out[1] == [
        "enter loop0", "exit loop0 None", "enter loop1", "exit loop1 None",
        "enter swallow", "exit swallow KeyError", "enter ret", "exit ret None",
    ]


def test_comprehensions_boolops_comparisons_and_augassign_with_awaits():
    """Awaits inside comprehensions, and/or, chains, walrus and augmented assignment match native."""
    wf = wf_of("""
    async def wf(xs):
        order = []
        def tick(v):
            order.append(v)
            return v
        squares = [await signal(f"s{x}") * x for x in xs if x != 2]
        d = {x: await signal("d") for x in xs[:2]}
        both = tick(0) or await signal("or") and tick(1)
        chain = tick(1) < (n := await signal("c")) < tick(100)
        acc = [1]
        acc[tick(0)] += await signal("aug")
        return squares, d, both, chain, n, acc, order
    """)
    out, _ = same(wf, [1, 2, 3], reply=lambda c: 7)
    assert out[1][0] == [7, 21]


def test_closures_over_locals_see_later_writes_after_restore():
    """A lambda over a workflow local sees the value written after it was made, across restores."""
    wf = wf_of("""
    async def wf():
        x = 1
        get = lambda: x * 10
        def add(k):
            nonlocal x
            x += k
        await timer("a", 1)
        x = 5
        add(2)
        await timer("b", 1)
        return get(), x
    """)
    assert same(wf)[0] == ("ok", (70, 7))


def test_cached_loop_writes_locals_back_on_exception_and_del():
    """A hot loop kept in block locals writes its values back when it raises and honours del."""
    wf = wf_of("""
    async def wf():
        total = 0
        try:
            for i in range(10):
                total += i
                if i == 4:
                    raise ValueError
        except ValueError:
            await timer("caught", 1)
        gone = 1
        for j in range(2):
            del gone
            gone = j
        del gone
        await timer("t", 1)
        try:
            return gone
        except NameError:
            return total, i
    """)
    assert same(wf)[0] == ("ok", (10, 4))


def test_match_with_awaits_in_subject_guard_and_body():
    """match with awaits in subject, guard and body binds captures like native, even on guard failure."""
    wf = wf_of("""
    async def wf():
        out = []
        for _ in range(3):
            match await signal("m"):
                case [a, *rest] if await signal("g") > a:
                    out.append(("seq", a, rest, await signal("b")))
                case {"k": v}:
                    out.append(("map", v))
                case other:
                    out.append(("other", other, a))
        return out
    """)
    vals = iter([[1, 2], 5, "b", [9, 9], 0, {"k": 3}])
    native = run(wf, native=True, reply=lambda c: next(vals))
    vals = iter([[1, 2], 5, "b", [9, 9], 0, {"k": 3}])
    compiled = run(wf, reply=lambda c: next(vals))
    assert compiled == native
    assert native[0][0] == "ok"


def test_start_binds_arguments_like_the_native_function():
    """wf.start() raises the same TypeError as calling the native function."""
    wf = wf_of("""
    async def wf(a, b=2, *, c):
        await timer("t", 1)
    """)
    with pytest.raises(TypeError) as compiled:
        wf.start(1)
    with pytest.raises(TypeError) as native:
        wf.__wrapped__(1)
    assert str(compiled.value) == str(native.value)


def test_step_contract_first_step_and_finished():
    """step() refuses a value on the first step and any step after the workflow finished."""
    wf = wf_of("""
    async def wf():
        return await timer("t", 1)
    """)
    cont = wf.start()
    with pytest.raises(TypeError):
        step(cont, send=1)
    with StepContext().active():
        assert step(cont) == Suspended(timer("t", 1))
        assert step(cont, send="v") == Finished("v")
        with pytest.raises(WorkflowError):
            step(cont)
    cont = wf.start()
    r = step(cont, throw=KeyError("early"))
    assert isinstance(r, Raised) and isinstance(r.exception, KeyError)


def test_harness_records_effects_and_refuses_send_after_finish():
    """The harness collects effects per step and says clearly that a finished workflow cannot resume."""
    from workflows import reducer, workflow_id

    def note(db, text):  # pragma: no cover - never run, only recorded
        pass

    wf = wf_of("""
    async def wf():
        reducer(note, workflow_id())
        await timer("t", 1)
        reducer(note, "second")
        return "done"
    """, extra={"reducer": reducer, "workflow_id": workflow_id, "note": note})
    h = WorkflowHarness(wf, workflow_id="w-7", roundtrip=False)
    assert [e.args for e in h.effects] == [("w-7",)]
    assert h.send() is h.last
    assert h.result() == "done"
    assert [e.args for e in h.effects] == [("w-7",), ("second",)]
    with pytest.raises(WorkflowError, match="already finished"):
        h.send(1)



@pytest.mark.filterwarnings("ignore::workflows.CompileWarning")  # expected: tested for itself elsewhere
def test_globals_local_imports_nested_classes_walrus_and_verbatim_match():
    """global writes, local imports, nested classes/defs, walrus and verbatim match behave natively."""
    g: dict[str, Any] = {"timer": timer, "signal": signal, "__name__": "core_misc_mod"}
    src = """
    COUNTER = 0

    async def wf(items):
        global COUNTER
        import json
        from math import sqrt as root
        class Point:
            def __init__(self, x):
                self.x = x
            def norm(self):
                return root(self.x * self.x) + base
        base = 1
        out = []
        for it in items:
            COUNTER += 1
            if (n := len(out)) > 1:
                out.append(("walrus", n))
            match it:
                case {"x": px} if px > 0:
                    out.append(Point(px).norm())
                case [first, *rest]:
                    out.append((first, rest))
                case _:
                    out.append(json.dumps(it))
            await timer("t", 1)
        total = sum(v for v in range(4))
        return out, COUNTER, total, px, first
    """
    wf = compile_workflow_source(textwrap.dedent(src).lstrip("\n"), "core_misc.py", "wf", g)
    native = run(wf, [{"x": 3}, [1, 2, 3], "s"], native=True)
    g["COUNTER"] = 0
    assert run(wf, [{"x": 3}, [1, 2, 3], "s"], roundtrip=False) == native
    g["COUNTER"] = 0
    assert run(wf, [{"x": 3}, [1, 2, 3], "s"], roundtrip=True) == native
    assert native[0][1][1] == 3


def test_verbatim_hot_loop_with_captured_and_uncached_names():
    """A hot loop whose names are captured by a lambda still reads and writes through the frame."""
    wf = wf_of("""
    async def wf(n):
        acc = 0
        peek = lambda: acc
        seen = []
        for i in range(n):
            acc += i
            seen.append(peek())
        try:
            raise KeyError(acc)
        except KeyError as e:
            for j in range(2):
                seen.append(e.args[0] + j)
        await timer("t", 1)
        return seen, acc
    """)
    assert same(wf, 4)[0] == ("ok", ([0, 1, 3, 6, 6, 7], 6))


def test_errors_raised_by_runtime_helpers_show_only_user_frames():
    """An error raised inside a compiler helper (del of an unbound local) shows the user's line last."""
    wf = wf_of("""
    async def wf():
        await timer("t", 1)
        del never
    """, filename="tb_helper.py")
    h = WorkflowHarness(wf)
    h.send(None)
    assert isinstance(h.exception, UnboundLocalError)
    frames = traceback.extract_tb(h.exception.__traceback__)
    assert [(f.filename, f.lineno, f.name) for f in frames] == [("tb_helper.py", 3, "wf")]


def test_sub_workflow_error_traceback_shows_caller_and_callee_lines():
    """An error raised in an inline sub-workflow shows the caller's await line, then the callee's."""
    helper = wf_of("""
    async def helper(n):
        await timer("h", 1)
        return 1 / n
    """, name="helper", filename="tb_helper_wf.py")
    caller = wf_of("""
    async def caller(n):
        await timer("c", 1)
        return await helper(n)
    """, name="caller", filename="tb_caller_wf.py", extra={"helper": helper})
    h = WorkflowHarness(caller, 0)
    h.send(None)
    h.send(None)
    frames = traceback.extract_tb(h.exception.__traceback__)
    assert [(f.filename, f.lineno, f.name) for f in frames] == [
        ("tb_caller_wf.py", 3, "caller"),
        ("tb_helper_wf.py", 3, "helper"),
    ]


def test_leap_out_of_native_finally_inside_awaiting_handler_keeps_name_bound_until_it_runs():
    """A return through a native finally inside an awaiting handler sees `e` in that finally."""
    wf = wf_of("""
    async def wf():
        seen = []
        try:
            raise KeyError("k")
        except KeyError as e:
            await timer("h", 1)
            try:
                return seen
            finally:
                seen.append(repr(e))
    """)
    assert same(wf)[0] == ("ok", ["KeyError('k')"])


@pytest.mark.parametrize("future", [False, True])
def test_nested_annotations_follow_the_workflows_own_future_imports(future):
    """Nested defs' annotations are objects, or strings under the source's own future import."""
    head = "from __future__ import annotations\n" if future else ""
    wf = wf_of(head + textwrap.dedent("""
    async def wf(x):
        def f(a: int) -> list[int]:
            return a
        await timer("t", 1)
        return f.__annotations__
    """))
    expected = {"a": "int", "return": "list[int]"} if future else {"a": int, "return": list[int]}
    assert run(wf, 1, native=True)[0] == ("ok", expected)
    assert run(wf, 1)[0] == ("ok", expected)
