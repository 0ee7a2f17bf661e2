"""``type X = ...`` statements (Python 3.12+) in workflows: workflow locals, or a compile error."""

from __future__ import annotations

import sys
import textwrap
import warnings
from typing import Any

import pytest

from workflows import CheckpointError, CompileError, CompileWarning, timer
from workflows._compiler import compile_workflow_source
from workflows.testing import WorkflowHarness

from .diffharness import Oracle, compare, run_compiled, run_native

pytestmark = pytest.mark.skipif(
    sys.version_info < (3, 12), reason="type statements need Python 3.12"
)

_n = 0


def wf_of(src: str) -> Any:
    """Compile the dedented ``src`` (its async def ``wf``) under a fresh file name."""
    global _n
    _n += 1
    g: dict[str, Any] = {"timer": timer, "__name__": f"alias_flows_{_n}"}
    return compile_workflow_source(textwrap.dedent(src).lstrip("\n"), f"alias_{_n}.py", "wf", g)


def assert_matches_native(wf: Any, *args: Any) -> Any:
    """Run ``wf`` natively and compiled (with and without checkpoints); return the native trace."""
    native = run_native(wf, args, Oracle())
    assert native.failure is None, native.failure
    for roundtrip in (False, True):
        compiled = run_compiled(wf, args, Oracle(), roundtrip=roundtrip)
        diffs = compare(native, compiled, with_chain=True)
        assert not diffs, "\n".join(diffs)
    return native


def test_type_alias_is_a_workflow_local_across_awaits():
    """An await-free type alias binds a local that survives checkpoints, named and valued as natively."""
    wf = wf_of("""
    async def wf(x):
        type Pair = tuple[int, int]
        await timer("t", 1)
        before = repr(Pair.__value__)
        await timer("t", 2)
        return Pair.__name__, before, repr(Pair.__value__), x
    """)
    native = assert_matches_native(wf, 3)
    assert native.outcome == ("return", ("Pair", "tuple[int, int]", "tuple[int, int]", 3))


def test_type_alias_value_reads_workflow_locals_lazily():
    """The alias's value names workflow locals and is evaluated when first read, as natively."""
    wf = wf_of("""
    async def wf(x):
        Item = int
        type Items = list[Item]
        Item = str
        first = repr(Items.__value__)
        await timer("t", 1)
        return first, repr(Items.__value__)
    """)
    native = assert_matches_native(wf, 0)
    assert native.outcome == ("return", ("list[str]", "list[str]"))


def test_type_parameters_shadow_workflow_locals():
    """A generic alias's type parameter is its own, even when a workflow local has the same name."""
    wf = wf_of("""
    async def wf(x):
        T = x
        type Box[T] = list[T]
        await timer("t", 1)
        (param,) = Box.__type_params__
        return param.__name__, repr(Box.__value__), T
    """)
    native = assert_matches_native(wf, 7)
    assert native.outcome == ("return", ("T", "list[T]", 7))


def test_generic_nested_function_and_class_keep_their_type_parameters():
    """Type parameters of a nested generic def or class shadow workflow locals of the same name."""
    wf = wf_of("""
    async def wf(x):
        T = "local"
        def first[T](items: list[T]) -> T:
            return items[0]
        class Holder[T]:
            def __init__(self, v: T) -> None:
                self.v = v
        await timer("t", 1)
        return first([x, 2]), Holder(x).v, T, first.__type_params__[0].__name__
    """)
    native = assert_matches_native(wf, 5)
    assert native.outcome == ("return", (5, 5, "local", "T"))


def test_type_alias_in_loop_and_after_last_await():
    """Aliases made in a loop body and after the last await behave as natively."""
    wf = wf_of("""
    async def wf(n):
        names = []
        for i in range(n):
            type Step = tuple[int, ...]
            names.append(Step.__name__)
            await timer("t", i)
        type Done = dict[str, int]
        return names, Done.__name__
    """)
    native = assert_matches_native(wf, 2)
    assert native.outcome == ("return", (["Step", "Step"], "Done"))


def test_await_in_type_alias_is_a_compile_error():
    """`type X = ... await ...` is rejected with a CompileError at the statement."""
    with pytest.raises(CompileError) as info:
        wf_of("""
        async def wf():
            x = 1
            type Later = list[await timer("t", 1)]
        """)
    err = info.value
    assert "'await' cannot be used in the type alias 'Later'" in err.msg
    assert (err.lineno, err.offset) == (3, 5)


def test_self_referencing_alias_at_an_await_fails_checkpoint_clearly():
    """A recursive alias live at an await fails the checkpoint naming it, with what to do."""
    wf = wf_of("""
    async def wf():
        type Tree = list[Tree]
        await timer("t", 1)
    """)
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf)
    err = info.value
    assert err.variable == "Tree"
    assert "define the alias at module level" in str(err)
    h = WorkflowHarness(wf, roundtrip=False)  # without checkpoints it runs as natively
    h.send(None)
    assert h.result() is None


def test_global_type_alias_binds_the_module_global():
    """`global X` then `type X = ...` binds the module global (and warns that it is a global write)."""
    global _n
    _n += 1
    g: dict[str, Any] = {"timer": timer, "__name__": f"alias_flows_{_n}"}
    src = "async def wf():\n    global Alias\n    type Alias = int\n    await timer('t', 1)\n"
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        wf = compile_workflow_source(src, f"alias_{_n}.py", "wf", g)
    assert [w.lineno for w in caught if issubclass(w.category, CompileWarning)] == [3]
    WorkflowHarness(wf).send(None)
    assert g["Alias"].__name__ == "Alias" and g["Alias"].__value__ is int


@pytest.mark.parametrize(
    ("src", "where", "line"),
    [
        (
            """
            async def wf(x):
                B = int
                type Items = list[B]
                await timer("t", 1)
                B = str
                return Items.__value__
            """,
            "the type alias 'Items' reads",
            3,
        ),
        (
            """
            async def wf(x):
                out = []
                for B in (int, str):
                    class Box[T: B]:
                        pass
                    out.append(Box)
                    await timer("t", 1)
                return [b.__type_params__[0].__bound__ for b in out]
            """,
            "a type parameter of 'Box' (its bound, constraints or default) reads",
            4,
        ),
        (
            """
            async def wf(x):
                B = int
                def first[T: (B, bytes)](items: list[T]) -> T:
                    return items[0]
                for i in range(2):
                    await timer("t", i)
                    B = str
                return first.__type_params__[0].__constraints__
            """,
            "a type parameter of 'first' (its bound, constraints or default) reads",
            3,
        ),
    ],
)
def test_lazy_value_reading_a_variable_bound_again_after_an_await_is_a_compile_error(
    src: str, where: str, line: int
) -> None:
    """An alias's value or a type parameter's bound is evaluated when first used, natively; a
    checkpoint evaluates it at the await. One reading a variable bound again after an await would
    not see the later value after a restore: refused at the statement, saying what to do."""
    with pytest.raises(CompileError) as info:
        wf_of(src)
    err = info.value
    assert err.msg.startswith(f"{where} the workflow variable 'B' lazily"), err.msg
    assert "bind a copy before: B_0 = B" in err.msg
    assert err.lineno == line


def test_lazy_value_reading_a_variable_that_keeps_its_value_runs():
    """A variable bound again before any await (or never again) has one value at the checkpoints:
    the alias and the bound are evaluated as natively."""
    wf = wf_of("""
    async def wf(x):
        B = int
        type Items = list[B]
        B = str
        def first[T: B](items: list[T]) -> T:
            return items[0]
        await timer("t", 1)
        return repr(Items.__value__), first.__type_params__[0].__bound__.__name__, first([x])
    """)
    native = assert_matches_native(wf, 4)
    assert native.outcome == ("return", ("list[str]", "str", 4))
