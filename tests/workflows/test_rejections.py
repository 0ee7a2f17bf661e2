"""Every construct the compiler rejects fails at decoration time with a precise CompileError.

Each rule is checked for its message (it names the construct), its position (``lineno`` and
``offset`` = column + 1 of the offending node, as SyntaxError has it), the file name and the
source line. Most sources go through ``compile_workflow_source`` so that line numbers are exact
and sources that Python itself would refuse to compile as a module (``yield from`` in an
``async def``) can be checked too.
"""

import sys
import textwrap

import pytest

from workflows import CompileError, timer, workflow
from workflows._compiler import compile_workflow_source

FILENAME = "rejected_flows.py"


def _globals():
    import workflows

    g = {name: getattr(workflows, name) for name in workflows.__all__}
    g["sys"] = sys
    return g


def rejected(src: str, name: str = "wf") -> CompileError:
    """Compile ``src`` and return the CompileError it must raise."""
    src = textwrap.dedent(src).lstrip("\n")
    with pytest.raises(CompileError) as info:
        compile_workflow_source(src, FILENAME, name, _globals())
    return info.value


def at(src: str, needle: str, nth: int = 1) -> tuple[int, int]:
    """(lineno, col + 1) of the ``nth`` occurrence of ``needle`` in the dedented source."""
    src = textwrap.dedent(src).lstrip("\n")
    seen = 0
    for lineno, line in enumerate(src.splitlines(), start=1):
        start = 0
        while (col := line.find(needle, start)) >= 0:
            seen += 1
            if seen == nth:
                return lineno, col + 1
            start = col + 1
    raise AssertionError(f"{needle!r} not in source")


def line_of(src: str, lineno: int) -> str:
    """The source line ``lineno`` of the dedented source."""
    return textwrap.dedent(src).lstrip("\n").splitlines()[lineno - 1]


def check(src: str, needle: str | tuple[str, ...], *words: str) -> CompileError:
    """Assert the single problem in ``src`` is reported at ``needle`` with ``words`` in the message.

    A tuple of needles accepts any of those positions (the construct, or the await inside it).
    """
    err = rejected(src)
    needles = needle if isinstance(needle, tuple) else (needle,)
    msg = str(err.msg).lower()
    for w in words:
        assert w.lower() in msg, f"{w!r} not in message {err.msg!r}"
    assert err.filename == FILENAME
    assert (err.lineno, err.offset) in [at(src, n) for n in needles], (err.lineno, err.offset, err)
    lineno = err.lineno
    assert err.text is not None and err.text.strip() == line_of(src, lineno).strip()
    assert len(err.problems) == 1
    return err


YIELD = """
async def wf(x):
    await timer("t", 1)
    y = yield x
    return y
"""

YIELD_FROM = """
async def wf(x):
    await timer("t", 1)
    yield from [1, 2]
"""

ASYNC_FOR = """
async def wf(xs):
    async for x in xs:
        await timer("t", 1)
"""

ASYNC_FOR_COMP = """
async def wf(xs):
    return [x async for x in xs]
"""

ASYNC_WITH = """
async def wf(m):
    async with m as v:
        await timer("t", 1)
"""

GENEXP_AWAIT = """
async def wf(xs):
    g = ((await timer(str(x), 1)) for x in xs)
    return list(g)
"""

DECORATOR_AWAIT = """
async def wf(d):
    @(await d)
    def h():
        return 1
    return h()
"""

DEFAULT_AWAIT = """
async def wf(x):
    def h(v=await timer("d", 1)):
        return v
    return h()
"""

KWDEFAULT_AWAIT = """
async def wf(x):
    def h(*, v=await timer("d", 1)):
        return v
    return h()
"""

ANNOTATION_AWAIT = """
async def wf(x):
    def h(v: await timer("a", 1)) -> int:
        return v
    return h(1)
"""

RETURN_ANNOTATION_AWAIT = """
async def wf(x):
    def h(v) -> await timer("a", 1):
        return v
    return h(1)
"""

CLASS_BASE_AWAIT = """
async def wf(x):
    class K(await timer("b", 1)):
        pass
    return K
"""

CLASS_KEYWORD_AWAIT = """
async def wf(x):
    class K(metaclass=await timer("b", 1)):
        pass
    return K
"""

EXCEPT_TYPE_AWAIT = """
async def wf(x):
    try:
        await timer("t", 1)
    except (await timer("e", 1)):
        pass
"""

EXCEPT_STAR_AWAIT = """
async def wf(x):
    try:
        await timer("t", 1)
    except* ValueError:
        pass
"""

LOCALS_CALL = """
async def wf(x):
    await timer("t", 1)
    return locals()
"""

VARS_CALL = """
async def wf(x):
    await timer("t", 1)
    return vars()
"""

EXEC_CALL = """
async def wf(x):
    await timer("t", 1)
    exec("y = 1")
"""

EVAL_CALL = """
async def wf(x):
    await timer("t", 1)
    return eval("x + 1")
"""

SUPER_CALL = """
async def wf(x):
    await timer("t", 1)
    return super().thing()
"""

GETFRAME_CALL = """
async def wf(x):
    await timer("t", 1)
    return sys._getframe(0).f_locals
"""

LOCALS_VALUE = """
async def wf(x):
    get = locals
    await timer("t", 1)
    return get()
"""

TRACEBACK_FRAME_LOCALS = """
async def wf(x):
    await timer("t", 1)
    try:
        1 / x
    except ZeroDivisionError as e:
        return e.__traceback__.tb_frame.f_locals
"""

CURRENT_FRAME_BACK = """
async def wf(x):
    await timer("t", 1)
    return inspect.currentframe().f_back
"""

CLOSURE_CELLS = """
async def wf(x):
    def g():
        return x
    cell = g.__closure__[0]
    await timer("t", 1)
    return cell.cell_contents
"""

CLOSURE_FREEVARS = """
async def wf(x):
    g = lambda: x
    await timer("t", 1)
    return g.__code__.co_freevars
"""

CLOSURE_VARS = """
async def wf(x):
    def g():
        return x
    await timer("t", 1)
    return inspect.getclosurevars(g).nonlocals
"""

DIR_CALL = """
async def wf(x):
    await timer("t", 1)
    return "x" in dir()
"""

NONLOCAL_AT_TOP = """
async def wf(x):
    nonlocal y
    await timer("t", 1)
"""


def test_yield_is_rejected():
    """`yield` (an async generator) is rejected at the yield."""
    check(YIELD, "yield x", "yield")


def test_yield_from_is_rejected():
    """`yield from` is rejected at the yield from."""
    check(YIELD_FROM, "yield from", "yield")


def test_async_for_statement_is_rejected():
    """`async for` statement is rejected at the statement."""
    check(ASYNC_FOR, "async for", "async for")


def test_async_for_in_comprehension_is_rejected():
    """An async comprehension is rejected at the comprehension's `async for` or the comprehension."""
    err = rejected(ASYNC_FOR_COMP)
    assert "async" in err.msg.lower() and "comprehension" in err.msg.lower()
    assert err.lineno == 2
    assert err.offset in (at(ASYNC_FOR_COMP, "[x async")[1], at(ASYNC_FOR_COMP, "async for")[1])


def test_async_with_is_rejected():
    """`async with` is rejected at the statement, suggesting try/finally."""
    err = check(ASYNC_WITH, "async with", "async with")
    assert "finally" in err.msg.lower()


def test_generator_expression_with_await_is_rejected():
    """A generator expression containing await is rejected at the generator expression."""
    check(GENEXP_AWAIT, ("((await", "await timer"), "generator")


@pytest.mark.parametrize(
    ("src", "needle", "word"),
    [
        (DECORATOR_AWAIT, ("await d", "(await d)"), "decorator"),
        (DEFAULT_AWAIT, "await timer", "default"),
        (KWDEFAULT_AWAIT, "await timer", "default"),
        (ANNOTATION_AWAIT, "await timer", "annotation"),
        (RETURN_ANNOTATION_AWAIT, "await timer", "annotation"),
        (CLASS_BASE_AWAIT, "await timer", "base"),
        (CLASS_KEYWORD_AWAIT, "await timer", "class keyword 'metaclass='"),
    ],
    ids=[
        "decorator",
        "default",
        "kw-default",
        "annotation",
        "return-annotation",
        "class-base",
        "class-keyword",
    ],
)
def test_await_in_nested_definition_header_is_rejected(src, needle, word):
    """An await in a nested def's decorator/default/annotation or a class base is rejected there."""
    check(src, needle, word, "await")


def test_await_in_except_type_is_rejected():
    """An await in an except clause's type expression is rejected at that await."""
    check(EXCEPT_TYPE_AWAIT, ("await timer(\"e\"", "(await timer(\"e\""), "except")


def test_except_star_around_await_is_rejected():
    """try/except* whose body awaits is rejected at the try statement."""
    check(EXCEPT_STAR_AWAIT, ("try:", "except*", "await timer"), "except*")


def test_except_star_without_await_is_accepted():
    """try/except* with no await inside stays native and compiles."""
    src = """
    async def wf(x):
        try:
            raise ExceptionGroup("g", [ValueError(x)])
        except* ValueError:
            pass
        await timer("t", 1)
        return x
    """
    wf = compile_workflow_source(textwrap.dedent(src).lstrip("\n"), FILENAME, "wf", _globals())
    assert wf.__name__ == "wf"


@pytest.mark.parametrize(
    ("src", "needle", "word"),
    [
        (LOCALS_CALL, "locals()", "locals"),
        (VARS_CALL, "vars()", "vars"),
        (EXEC_CALL, "exec(", "exec"),
        (EVAL_CALL, "eval(", "eval"),
        (SUPER_CALL, "super()", "super"),
        (GETFRAME_CALL, "sys._getframe", "_getframe"),
        (DIR_CALL, "dir()", "dir"),
        (LOCALS_VALUE, "locals", "locals cannot be used"),
        (TRACEBACK_FRAME_LOCALS, "e.__traceback__.tb_frame.f_locals", "frame.f_locals"),
        (CURRENT_FRAME_BACK, "inspect.currentframe().f_back", "frame.f_back"),
        (CLOSURE_CELLS, "g.__closure__", "__closure__ of a function made in a workflow"),
        (CLOSURE_FREEVARS, "g.__code__.co_freevars", "co_freevars of a function made in a workflow"),
        (CLOSURE_VARS, "inspect.getclosurevars(g)", "getclosurevars() of a function made in a workflow"),
    ],
    ids=["locals", "vars", "exec", "eval", "super", "getframe", "dir", "locals-value",
         "traceback-frame-locals", "frame-back", "closure-cells", "closure-freevars", "closure-vars"],
)
def test_frame_introspection_is_rejected(src, needle, word):
    """locals()/vars()/dir()/exec/eval/zero-arg super()/sys._getframe are rejected at the call;
    locals passed on as a value, and a frame's f_locals or f_back, where they are used."""
    check(src, needle, word)


def test_the_closure_of_a_module_function_is_accepted():
    """Only the closures of functions made in the workflow are the compiler's."""
    src = """
    async def wf(x):
        await timer("t", 1)
        return len(sorted.__code__.co_freevars if hasattr(sorted, "__code__") else ()), x.__closure__
    """
    wf = compile_workflow_source(textwrap.dedent(src).lstrip("\n"), FILENAME, "wf", _globals())
    assert wf.__name__ == "wf"


def test_vars_with_argument_is_accepted():
    """vars(obj) with an argument does not introspect the frame and compiles."""
    src = """
    async def wf(x):
        await timer("t", 1)
        return sorted(vars(x))
    """
    compile_workflow_source(textwrap.dedent(src).lstrip("\n"), FILENAME, "wf", _globals())


NESTED_ASYNC_DEF = """
async def wf(x):
    async def helper():
        return await signal("x")
    return await helper()
"""

NESTED_ASYNC_DEF_DEEPER = """
async def wf(x):
    def outer():
        async def helper():
            return 1
        return helper
    await timer("t", 1)
    return outer
"""


@pytest.mark.parametrize("src", [NESTED_ASYNC_DEF, NESTED_ASYNC_DEF_DEEPER], ids=["in-body", "in-nested-def"])
def test_nested_async_def_is_rejected(src):
    """A nested `async def` is rejected at its definition (its awaits could not be workflow
    steps; it used to compile and fail at its await), with what to write instead."""
    err = check(src, "async def helper", "nested 'async def'", "'helper'", "@workflow", "plain def")
    assert "subroutine" in err.msg


def test_nonlocal_at_workflow_level_is_rejected_in_source():
    """`nonlocal` in the workflow's own body is rejected at the nonlocal statement."""
    check(NONLOCAL_AT_TOP, "nonlocal y", "nonlocal")


def test_nonlocal_at_workflow_level_is_rejected_by_decorator():
    """A decorated workflow nested in a function that declares `nonlocal` is rejected."""
    y = 0
    with pytest.raises(CompileError) as info:

        @workflow
        async def wf():
            nonlocal y
            y += 1
            await timer("t", 1)

    problems = [p for p in info.value.problems if "nonlocal" in p.msg]
    assert problems, info.value.problems
    assert problems[0].filename == __file__
    assert problems[0].text is not None and problems[0].text.strip() == "nonlocal y"


def test_closure_over_enclosing_variables_is_rejected():
    """A workflow that reads an enclosing function's variable is rejected, naming the variable."""
    limit = 3
    with pytest.raises(CompileError) as info:

        @workflow
        async def wf():
            await timer("t", limit)

    err = info.value
    assert "limit" in err.msg
    assert "clos" in err.msg.lower() or "enclosing" in err.msg.lower()
    assert err.filename == __file__


def test_nested_workflow_without_closure_is_accepted():
    """A workflow defined inside a function that captures nothing compiles (works in-process)."""

    @workflow
    async def wf(x):
        await timer("t", x)
        return x

    assert wf.__qualname__.endswith("<locals>.wf")


def test_several_problems_are_all_reported():
    """Every problem is collected: the first is raised, `problems` lists all, the message counts."""
    src = """
    async def wf(xs):
        async for x in xs:
            pass
        y = locals()
        async with xs:
            pass
        return (yield y)
    """
    err = rejected(src)
    assert len(err.problems) == 4
    assert "(and 3 more)" in err.msg
    positions = [(p.lineno, p.offset) for p in err.problems]
    assert positions == sorted(positions)
    assert positions[0] == at(src, "async for")
    assert (err.lineno, err.offset) == positions[0]
    assert positions[1] == at(src, "locals()")
    assert positions[2] == at(src, "async with")
    assert positions[3] == at(src, "yield y")
    for p in err.problems:
        assert p.filename == FILENAME


def test_compile_error_is_a_syntax_error_and_formats_with_caret():
    """CompileError is a SyntaxError: Python's formatter shows the file, line and a caret."""
    import traceback

    err = rejected(ASYNC_WITH)
    assert isinstance(err, SyntaxError)
    text = "".join(traceback.format_exception_only(type(err), err))
    assert FILENAME in text and "async with m as v:" in text and "^" in text


LAMBDA_DEFAULT_AWAIT = """
async def wf(x):
    f = lambda a=await timer("d", 1): a
    return f()
"""


def test_await_in_a_lambda_default_is_rejected():
    """A lambda's default is evaluated in the workflow where the lambda stands; an await there is
    refused like a nested def's (it was an internal compiler error)."""
    check(LAMBDA_DEFAULT_AWAIT, "await timer", "default", "lambda")


@pytest.mark.parametrize(
    "line",
    [
        'x and timer("t", 1)',
        'timer("t", 1) if x else None',
        'None, timer("t", 1)',
        '[timer(str(i), 1) for i in range(2)]',
        '{*(), timer("t", 1)}',
    ],
    ids=["and", "conditional", "tuple", "comprehension", "set"],
)
def test_a_command_dropped_inside_an_expression_statement_is_rejected(line):
    """A command built in a part of an expression statement whose value is dropped does nothing:
    rejected at the command, saying to await it."""
    src = f"""
async def wf(x):
    {line}
    await timer("u", 1)
"""
    err = check(src, "timer(", "drops it", "await timer(")
    assert "does nothing" in err.msg


def test_a_command_kept_by_a_walrus_in_an_expression_statement_is_accepted():
    """``(t := timer(...))`` binds the command (it may be awaited later): not refused."""
    src = textwrap.dedent("""
        async def wf(x):
            (t := timer("t", 1))
            await t
            return x
    """).lstrip("\\n")
    compile_workflow_source(src, FILENAME, "wf", _globals())


WITH_TUPLE_TARGET_AWAIT = """
async def wf(m, d):
    with m as (a, d[await timer("k", 1)]):
        pass
"""

COMP_TARGET_AWAIT = """
async def wf(xs, d):
    return [v for d[await timer("k", 1)] in xs]
"""

CLASS_CELL = """
async def wf(n):
    await timer("t", 1)
    return __class__.__name__
"""

LOCALS_IN_NESTED_DEF = """
async def wf(v):
    def describe(a):
        total = a + v
        return "{a}+{v}={total}".format(**locals())
    await timer("t", 1)
    return describe(1)
"""

VARS_IN_LAMBDA = """
async def wf(v):
    see = lambda: (v, sorted(vars()))
    await timer("t", 1)
    return see(), v
"""

EVAL_IN_NESTED_DEF = """
async def wf(v):
    def add():
        return eval("v + 1"), v
    await timer("t", 1)
    return add()
"""

EVAL_NONE_NAMESPACES = """
async def wf(v):
    await timer("t", 1)
    return eval("v + 1", None)
"""

BUILTINS_LOCALS = """
async def wf(v):
    await timer("t", 1)
    return sorted(builtins.locals())
"""


@pytest.mark.parametrize(
    ("src", "needle", "words"),
    [
        (WITH_TUPLE_TARGET_AWAIT, ("(a, d[await", "await timer"), ("await", "target")),
        (COMP_TARGET_AWAIT, ("d[await", "await timer"), ("await", "target", "comprehension")),
        (CLASS_CELL, "__class__", ("__class__", "name the class")),
        (LOCALS_IN_NESTED_DEF, "locals()", ("locals()", "'describe'", "'v'")),
        (VARS_IN_LAMBDA, "vars()", ("vars()", "lambda", "'v'")),
        (EVAL_IN_NESTED_DEF, "eval(", ("eval()", "'add'", "'v'")),
        (EVAL_NONE_NAMESPACES, "eval(", ("eval()", "explicit globals and locals")),
        (BUILTINS_LOCALS, "builtins.locals()", ("locals()",)),
    ],
    ids=["with-as-tuple", "comprehension-target", "class-cell", "locals-in-def", "vars-in-lambda",
         "eval-in-def", "eval-none", "builtins-locals"],
)
def test_what_would_see_the_compilers_frame_or_crash_is_rejected(src, needle, words):
    """An await in a with's tuple target or a comprehension's target (which crashed the
    compiler), ``__class__`` at workflow level, and ``locals()``, ``vars()``, ``dir()``,
    ``eval`` or ``exec`` reading the caller's namespaces from a function made in the workflow
    that uses its variables (or with ``None`` for them, or as ``builtins.locals()``), which
    natively see the workflow's variables and compiled would not, are refused where they are."""
    check(src, needle, *words)


def test_frame_readers_in_functions_that_use_no_workflow_variable_are_accepted():
    """locals() and eval() in a function made in the workflow that reads none of its variables,
    and eval with explicit namespaces, see the same natively and compiled: accepted."""
    src = """
    async def wf(v):
        def own(a):
            b = a + 1
            return sorted(locals()), eval("a + b")
        await timer("t", 1)
        return own(v), eval("w * 2", {}, {"w": v})
    """
    wf = compile_workflow_source(textwrap.dedent(src).lstrip("\n"), FILENAME, "wf", _globals())
    assert wf.__name__ == "wf"


def test_class_cell_in_a_function_made_in_a_workflow_method_is_rejected():
    """Zero-argument ``super()`` and ``__class__`` in a function or lambda made in a workflow
    written as a method read the method's class cell, which the workflow's code does not have:
    refused at the call (the compiler crashed on them); in a class made there, its own cell."""
    with pytest.raises(CompileError) as info:

        class Svc:
            @workflow
            async def run(self, n):
                await timer("t", 1)

                def h(me):
                    return super().hello()

                class Own:
                    def m(self):
                        return __class__, super().__repr__()

                return h(self), Own().m(), (lambda: __class__)()

    msgs = [(p.text.strip(), p.msg) for p in info.value.problems]
    assert [t for t, _ in msgs] == ["return super().hello()", "return h(self), Own().m(), (lambda: __class__)()"]
    assert "super(Class, obj)" in msgs[0][1] and "written as a method" in msgs[0][1]
    assert "name the class" in msgs[1][1] and "written as a method" in msgs[1][1]


class _Base:
    def hello(self):
        return "base"


class _Derived(_Base):
    def hello(self):
        return "derived"

    @workflow
    async def explicit_super(self, n):
        await timer("t", 1)
        first = super(_Derived, self).hello()  # noqa: UP008 (super() is refused in a workflow)
        get = super
        await timer("t", 2)
        return first, get(_Derived, self).hello(), n


def test_explicit_super_in_a_workflow_method_runs():
    """``super(Class, obj)`` (and the name ``super`` held in a variable) in a workflow written as
    a method compiles and runs as natively, across checkpoints."""
    from workflows.testing import WorkflowHarness

    h = WorkflowHarness(_Derived.explicit_super, _Derived(), 3)
    h.send(None)
    h.send(None)
    assert h.result() == ("base", "base", 3)
