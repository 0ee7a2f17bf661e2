"""``@workflow`` and ``compile_workflow_source``: find a workflow's source, compile it, register it."""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import linecache
import sys
import threading
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any, ParamSpec, TypeVar, cast, overload

from .._errors import CompileError
from .._registry import note_defined_with_module, register
from ._ast import parse
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
    with _deep(fn.__qualname__, fn.__code__.co_filename, fn.__code__.co_firstlineno) as found:
        return _compile(fn, name, found)


def _compile(
    fn: Any, name: str | None, found: list[ast.AsyncFunctionDef]
) -> WorkflowFunction[Any, Any]:
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
    found.append(node)
    key = name or f"{fn.__module__}:{fn.__qualname__}"
    enclosing = None
    if "<locals>" in fn.__qualname__:
        enclosing = fn.__qualname__.split(".<locals>")[-2].rpartition(".")[2]
    wf = compile_function(fn, node, filename, lines, key, enclosing)
    register("workflow", wf, key)
    if enclosing is not None and _module_code_runs(fn.__globals__):
        note_defined_with_module(key)
    return wf


def _module_code_runs(namespace: dict[str, Any]) -> bool:
    """True if the top-level code of the module whose namespace is ``namespace`` is running (it
    called what defines the workflow now): importing that module again runs it again."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is namespace:
            return True
        frame = frame.f_back
    return False


# Python's own compiler takes expressions nested about 3,000 deep (a sum of 2,000 terms, a chain of
# 1,000 method calls): its C recursion limit is three times the recursion limit. The workflow
# compiler's passes (ast.parse, copies, visitors, unparse) recurse in Python, several frames per
# level, so they run under a higher limit; whatever still exceeds it is a CompileError naming the
# statement, never a RecursionError.
_COMPILE_RECURSION_LIMIT = 25_000
_DEEP_LOCK = threading.Lock()
_deep_compiles = [0, 0]  # compiles under way (in any thread), and the limit before the first


@contextmanager
def _deep(qualname: str, filename: str, lineno: int) -> Iterator[list[ast.AsyncFunctionDef]]:
    """Compile under ``_COMPILE_RECURSION_LIMIT``; a RecursionError becomes a CompileError at the
    deepest statement of the workflow's node (appended to the yielded list once parsed)."""
    found: list[ast.AsyncFunctionDef] = []
    with _DEEP_LOCK:  # the limit is the process's: raised once for compiles that overlap
        if _deep_compiles[0] == 0:
            _deep_compiles[1] = sys.getrecursionlimit()
            if _deep_compiles[1] < _COMPILE_RECURSION_LIMIT:
                sys.setrecursionlimit(_COMPILE_RECURSION_LIMIT)
        _deep_compiles[0] += 1
    try:
        yield found
    except RecursionError:
        where, depth = _deepest_statement(found[0]) if found else (None, 0)
        line = where.lineno if where is not None else lineno
        what = (
            f"the statement at line {line} nests expressions {depth} deep"
            if depth
            else ("its code nests expressions")
        )
        text = linecache.getline(filename, line) or None
        raise CompileError(
            f"workflow {qualname}: {what}, too deep for the workflow compiler; split it into "
            "several statements (accumulate a long sum or chain into a variable step by step)",
            filename,
            line,
            (where.col_offset + 1) if where is not None else None,
            text,
        ) from None
    finally:
        with _DEEP_LOCK:
            _deep_compiles[0] -= 1
            if _deep_compiles[0] == 0 and sys.getrecursionlimit() == _COMPILE_RECURSION_LIMIT:
                sys.setrecursionlimit(min(_deep_compiles[1], _COMPILE_RECURSION_LIMIT))


def _deepest_statement(node: ast.AsyncFunctionDef) -> tuple[ast.stmt, int]:
    """The innermost statement holding the deepest nesting of expression nodes, and that depth
    (found iteratively: this runs when recursion failed)."""
    best: tuple[ast.stmt, int] = (node, 0)
    stack: list[tuple[ast.AST, ast.stmt, int]] = [(node, node, 0)]
    while stack:
        n, stmt, depth = stack.pop()
        if isinstance(n, ast.stmt):
            stmt, depth = n, 0
        elif depth > best[1]:
            best = (stmt, depth)
        stack.extend((c, stmt, depth + 1) for c in ast.iter_child_nodes(n))
    return best


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
        tree = parse(source, filename)
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
    with _deep(name, filename, 1) as found:
        return _compile_source(src, filename, name, g, lines, found)


def _compile_source(
    src: str,
    filename: str,
    name: str,
    g: dict[str, Any],
    lines: list[str],
    found: list[ast.AsyncFunctionDef],
) -> WorkflowFunction[Any, Any]:
    # Validate before executing: some rejected constructs (``yield`` with ``return value``,
    # ``yield from``) are errors to Python's own compiler too, and ours says what to do instead.
    tree = parse(src, filename)
    defs = [n for n in tree.body if isinstance(n, ast.AsyncFunctionDef)]
    named = [n for n in defs if n.name == name]
    # ``name`` is the async def's name, or (when the source has one async def) its registry key.
    target = named[0] if named else (defs[0] if len(defs) == 1 else None)
    if target is None:
        raise NameError(
            f"compile_workflow_source: {filename} defines no 'async def {name}' (and not exactly "
            "one async def to register under that name)"
        )
    found.append(target)
    check(target, filename, lines, (), None)
    exec(compile(src, filename, "exec", dont_inherit=True), g)  # noqa: S102  (the caller's own source)
    obj = g.get(target.name)
    if isinstance(obj, WorkflowFunction):
        return obj
    fn: Callable[..., Coroutine[Any, Any, Any]] = cast(Any, obj)  # an async def: workflow() checks
    return workflow(fn, name=None if named else name)


__all__ = ["compile_workflow_source", "workflow"]
