"""``@workflow`` and ``compile_workflow_source``: find a workflow's source, compile it, register it."""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import linecache
from collections.abc import Callable, Coroutine
from typing import Any, ParamSpec, TypeVar, cast, overload

from .._errors import CompileError
from .._registry import register
from ._codegen import compile_function
from ._function import WorkflowFunction
from ._validate import check

P = ParamSpec("P")
R = TypeVar("R")
_counter = itertools.count(1)


@overload
def workflow(
    fn: Callable[P, Coroutine[Any, Any, R]], /, *, name: str | None = None
) -> WorkflowFunction[P, R]: ...
@overload
def workflow(
    fn: None = None, /, *, name: str | None = None
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], WorkflowFunction[P, R]]: ...


def workflow(fn: Any = None, *, name: str | None = None) -> Any:
    """Compile an ``async def`` into a checkpointable workflow and register it.

    Use as ``@workflow`` or ``@workflow(name="custom.key")``. Unsupported constructs raise a
    ``CompileError`` (a ``SyntaxError``) at decoration time, listing every problem.
    """
    if fn is None:

        def deco(f: Any) -> WorkflowFunction[Any, Any]:
            compiled: WorkflowFunction[Any, Any] = workflow(f, name=name)
            return compiled

        return deco
    if isinstance(fn, WorkflowFunction):
        return fn
    if inspect.isasyncgenfunction(fn):
        _reject_async_generator(fn)
    if not inspect.iscoroutinefunction(fn):
        raise TypeError(f"@workflow decorates an 'async def' function, got {fn!r}")
    if name is not None and (not isinstance(name, str) or not name):
        raise TypeError(f"@workflow(name=...) must be a non-empty string, got {name!r}")
    filename = fn.__code__.co_filename
    lines = linecache.getlines(filename, fn.__globals__)
    if not lines:
        raise CompileError(
            f"cannot compile workflow {fn.__qualname__}: its source code is not available "
            f"({filename!r}; defined in the REPL, with -c or by exec()?); define it in a .py "
            "file, or compile it from text with compile_workflow_source(src, filename, name)",
            filename,
        )
    source = "".join(lines)
    node = _find(_parse(source, filename), fn)
    if node is None:
        raise CompileError(
            f"cannot compile workflow {fn.__qualname__}: no 'async def {fn.__name__}' starts at "
            f"line {fn.__code__.co_firstlineno} of {filename} (was the file edited after import?)",
            filename,
            fn.__code__.co_firstlineno,
        )
    key = name or f"{fn.__module__}:{fn.__qualname__}"
    enclosing = None
    if "<locals>" in fn.__qualname__:
        enclosing = fn.__qualname__.split(".<locals>")[-2].rpartition(".")[2]
    wf = compile_function(fn, node, filename, lines, key, enclosing)
    register("workflow", wf, key)
    return wf


def _reject_async_generator(fn: Any) -> None:
    """An ``async def`` with ``yield``: a CompileError at its yield (file, line, what instead)."""
    filename = fn.__code__.co_filename
    lines = linecache.getlines(filename, fn.__globals__)
    node = _find(_parse("".join(lines), filename), fn) if lines else None
    if node is not None:
        check(node, filename, lines, fn.__code__.co_freevars, None)  # raises at the yield
    raise CompileError(
        f"@workflow {fn.__qualname__} is an async generator ('async def' with 'yield'), which "
        "cannot be checkpointed; a workflow returns one value: collect results in a list and "
        "return it, or report progress with send()/reducer()",
        filename,
        fn.__code__.co_firstlineno,
    )


_PARSED: dict[tuple[str, int], ast.Module] = {}


def _parse(source: str, filename: str) -> ast.Module:
    k = (filename, hash(source))
    tree = _PARSED.get(k)
    if tree is None:
        tree = ast.parse(source, filename)
        if len(_PARSED) >= 64:  # a module's workflows are decorated together; keep it small
            _PARSED.clear()
        _PARSED[k] = tree
    return tree


def _find(tree: ast.Module, fn: Any) -> ast.AsyncFunctionDef | None:
    first = fn.__code__.co_firstlineno
    for n in ast.walk(tree):
        if isinstance(n, ast.AsyncFunctionDef) and n.name == fn.__name__:
            start = min([n.lineno] + [d.lineno for d in n.decorator_list])
            if start == first:
                return n
    return None


def compile_workflow_source(
    src: str, filename: str, name: str, globals: dict[str, Any] | None = None
) -> WorkflowFunction[Any, Any]:
    """Compile the ``async def name`` defined in ``src`` (for tests and program generators).

    The whole source is executed in ``globals`` (by default a fresh namespace holding the public
    names of ``workflows``), so helpers it defines are visible to the workflow; tracebacks show
    ``filename`` and its lines. ``name`` is the async def's name or, when the source defines
    exactly one async def, the registry key to register it under.
    """
    if globals is None:
        # A fresh namespace that already has the authoring API (timer, signal, select, ...).
        import workflows

        g = {n: getattr(workflows, n) for n in workflows.__all__}
    else:
        g = globals
    g.setdefault("__name__", f"workflow_source_{next(_counter)}")
    g.setdefault("__builtins__", builtins)
    lines = src.splitlines(True)
    linecache.cache[filename] = (len(src), None, lines, filename)
    # Validate before executing: some rejected constructs (``yield`` with ``return value``,
    # ``yield from``) are errors to Python's own compiler too, and ours says what to do instead.
    tree = ast.parse(src, filename)
    defs = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef)]
    named = [n for n in defs if n.name == name]
    # ``name`` is the async def's name, or (when the source has one async def) its registry key.
    target = named[0] if named else (defs[0] if len(defs) == 1 else None)
    if target is None:
        raise NameError(
            f"compile_workflow_source: {filename} defines no 'async def {name}' (and not exactly "
            "one async def to register under that name)"
        )
    check(target, filename, lines, (), None)
    exec(compile(src, filename, "exec", dont_inherit=True), g)  # noqa: S102  (the caller's own source)
    obj = g.get(target.name)
    if isinstance(obj, WorkflowFunction):
        return obj
    fn: Callable[..., Coroutine[Any, Any, Any]] = cast(Any, obj)  # an async def: workflow() checks
    return workflow(fn, name=None if named else name)


__all__ = ["compile_workflow_source", "workflow"]
