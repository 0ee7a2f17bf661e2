"""Code generation: a workflow's lowered blocks become functions, with their static tables."""

from __future__ import annotations
import __future__

import ast
import copy
import dis
import hashlib
import sys
import types
from collections.abc import Callable
from typing import Any, cast

from ._ast import compile_tree
from ._code import CompiledCode
from ._consts import const_key as _const_key
from ._function import WorkflowFunction
from ._lower import ROOT, Emitter, Lowered
from ._pickle_modules import workflow_writes
from ._scope import (
    FRAME,
    RT,
    Bindings,
    Rewriter,
    arg_names,
    fill_locations,
    frame_attr,
    rt_call,
)
from ._signals import scan as scan_signals
from ._upgrade import PointTable, describe_points, module_effects, start_point
from ._validate import check, warn

# 2: locals are frame attributes v_<name>; 3: a nested and/or as a value is lowered into the
# enclosing operator's jumps on 3.11, and comprehension variables read by a lambda made in the
# comprehension live in a holder per run (the same source compiles to other blocks and slots).
COMPILER_VERSION = "actorflow-compiler-3"
_PY312 = sys.version_info >= (3, 12)
# ``compile()`` inherits the caller's __future__ imports unless told not to: generated code must
# follow the workflow's own module instead (``from __future__ import annotations`` or not).
_FUTURE_FLAGS = 0
for _feature in __future__.all_feature_names:
    _FUTURE_FLAGS |= getattr(__future__, _feature).compiler_flag


def compile_function(
    fn: Any,
    node: ast.AsyncFunctionDef,
    filename: str,
    lines: list[str],
    key: str,
    enclosing: str | None,
) -> WorkflowFunction[Any, Any]:
    """Check, lower and generate the workflow ``fn`` (its parsed ``node``): the WorkflowFunction."""
    b = Bindings().scan(node.body)
    params = arg_names(node.args)
    locals_ = (set(params) | b.bound) - b.globals
    check(
        node, filename, lines, fn.__code__.co_freevars, enclosing, fn.__globals__, WorkflowFunction
    )

    # Names captured by nested scopes (or bound by except clauses) stay on the frame always.
    lazy = bool(fn.__code__.co_flags & __future__.annotations.compiler_flag)
    probe = Rewriter(locals_, lazy_annotations=lazy)
    for s in copy.deepcopy(node.body):
        probe.visit(s)
    no_cache = set(probe.captured)
    for n in ast.walk(node):
        if isinstance(n, ast.ExceptHandler) and n.name:
            no_cache.add(n.name)

    def source_of(e: ast.AST) -> str:
        return ast.unparse(e)

    em = Emitter(locals_, no_cache, source_of, filename, lazy)
    em.src = node.body[0]
    em.start(em.new_label())
    em.body(node.body)
    em.flush()
    if not em.ended:
        for s in em.leap("return", None, node.body[-1]):
            em.emit(s)
    low = Lowered(em.blocks, em.points, em.slots)

    fingerprint = _fingerprint(node)
    blocks, handlers, hctx, asts = _codegen(low, em, fn, filename, sorted(b.globals))
    code = CompiledCode(key, fingerprint, filename, blocks, handlers, hctx, low.points, low.slots)
    code.block_asts = asts
    code.globals = fn.__globals__
    code.native = fn.__code__
    code.closures = bool(probe.captured)
    code.stubs = {pc: _raiser(fn, filename, n) for pc, n in em.point_nodes.items()}
    code.comp_stops = {slot: _raiser(fn, filename, n) for slot, n in em.comp_nodes.items()}
    code.comp_spans = [
        (_span(n), _span(cast(Any, n).generators[0].iter)) for n in em.comp_nodes.values()
    ]
    code.table = PointTable(
        describe_points(node, em.point_nodes, em.shapes, locals_, COMPILER_VERSION,
                        module_effects(lines, filename, fn.__globals__)),
        start_point(params, COMPILER_VERSION),
        locals_,
        code.describe_slot,
    )
    warn(fn, node, b, filename, key)
    workflow_writes(fn.__globals__, b.globals & b.first.keys())
    wf = WorkflowFunction(fn, code, _binder(fn, node))
    wf._signal_scan = scan_signals(node)
    return wf


def _fingerprint(node: ast.AsyncFunctionDef) -> str:
    n = copy.copy(node)
    n.decorator_list = []
    dump = ast.dump(n, include_attributes=False)
    return hashlib.sha256(f"{COMPILER_VERSION}\n{dump}".encode()).hexdigest()


def _codegen(
    low: Lowered, em: Emitter, fn: Any, filename: str, globals_: list[str]
) -> tuple[list[Any], list[Any], list[Any], list[Any]]:
    # Temporaries used in one block stay block locals; the rest live on the frame and are
    # cleared when consumed.
    where: dict[str, set[int]] = {}
    for label, blk in low.blocks.items():
        for s in blk.stmts:
            for n in ast.walk(s):
                if isinstance(n, ast.Name) and n.id.startswith("_af_t"):
                    where.setdefault(n.id, set()).add(label)
    cross = {name for name, ls in where.items() if len(ls) > 1}

    class Temps(ast.NodeTransformer):
        def visit_Name(self, n: ast.Name) -> Any:
            if n.id not in cross:
                return n
            if isinstance(n.ctx, ast.Store):
                return ast.copy_location(frame_attr(n.id, ast.Store()), n)
            if id(n) in em.peeks:
                return ast.copy_location(frame_attr(n.id), n)
            return ast.copy_location(
                rt_call("take", ast.Name(FRAME, ast.Load()), ast.Constant(n.id)), n
            )

    nblocks = max(low.blocks) + 1
    blocks: list[Any] = [None] * nblocks
    handlers: list[Any] = [ROOT] * nblocks
    hctx: list[Any] = [()] * nblocks
    asts: list[Any] = [None] * nblocks
    glob = fn.__globals__
    qualname = fn.__qualname__
    private = _private_name(qualname)
    consts = Constants(fn.__code__)
    for label, blk in low.blocks.items():
        body = [Temps().visit(s) for s in blk.stmts] if cross else list(blk.stmts)
        if not body or not isinstance(body[-1], (ast.Return, ast.Raise)):
            body.append(
                ast.Return(
                    ast.Call(
                        ast.Attribute(ast.Name(RT, ast.Load()), "Done", ast.Load()),
                        [ast.Constant(None)],
                        [],
                    )
                )
            )
        if globals_:
            body.insert(0, ast.Global(list(globals_)))
        src = blk.src
        for s in body:
            fill_locations(s, src)
        args = ast.arguments(
            posonlyargs=[],
            args=[ast.arg(FRAME), ast.arg(RT)],
            vararg=None,
            kwonlyargs=[],
            kw_defaults=[],
            kwarg=None,
            defaults=[],
        )
        kw: dict[str, Any] = {"type_params": []} if _PY312 else {}
        fdef = ast.FunctionDef(fn.__name__, args, body, [], None, None, **kw)
        fill_locations(fdef, src)
        mod = ast.Module([_in_class(fdef, private)], [])
        try:
            co = compile_tree(mod, filename, fn.__code__.co_flags & _FUTURE_FLAGS)
        except Exception as e:  # a compiler bug: show the generated code
            raise RuntimeError(
                f"internal error compiling block {label} of {qualname}: {e}\n{ast.unparse(mod)}"
            ) from e
        if private is not None:
            co = next(c for c in co.co_consts if isinstance(c, types.CodeType))
        fcode = consts.merge(next(c for c in co.co_consts if isinstance(c, types.CodeType)))
        fcode = _requalify(fcode, fcode.co_qualname, qualname)
        # Compiled in a class body, a block naming ``super`` gets the class cell ``__class__``
        # as a free variable; nothing reads it (``super()`` and ``__class__`` are refused there).
        closure = tuple(types.CellType() for _ in fcode.co_freevars) or None
        f = types.FunctionType(fcode, glob, fn.__name__, None, closure)
        f.__qualname__ = qualname
        blocks[label] = f
        asts[label] = fdef
        handlers[label] = blk.region
        hctx[label] = blk.hctx
    return blocks, handlers, hctx, asts


def _private_name(qualname: str) -> str | None:
    """The class a workflow defined in a class body is a method of (``Svc`` for ``Svc.run``,
    ``Inner`` for ``Outer.Inner.run``), whose name CPython mangles ``__x`` names with; None for a
    workflow defined in a module or a function."""
    parts = qualname.split(".")
    if len(parts) < 2 or parts[-2] == "<locals>":
        return None
    return parts[-2]


def _in_class(fdef: ast.FunctionDef, private: str | None) -> ast.stmt:
    """``fdef`` as it is compiled: in a class body named ``private`` when the workflow is a
    method, so that CPython mangles its private names (``self.__x``, ``__x``) with that class's
    name, as it does natively."""
    if private is None:
        return fdef
    kw: dict[str, Any] = {"type_params": []} if _PY312 else {}
    cls = ast.ClassDef(private, [], [], [fdef], [], **kw)
    return ast.copy_location(cls, fdef)


def _requalify(co: types.CodeType, old: str, new: str) -> types.CodeType:
    """``co`` named ``new``, and the functions and classes made in it named under ``new`` (a
    workflow nested in a function or a class: ``make.<locals>.wf.<locals>.h``, not
    ``wf.<locals>.h``), as natively."""
    consts = [_requalify(c, old, new) if isinstance(c, types.CodeType) else c for c in co.co_consts]
    q = co.co_qualname
    if q == old:
        q = new
    elif q.startswith(old + "."):
        q = new + q[len(old) :]
    if q != co.co_qualname:
        # A class body's code sets the class's ``__qualname__`` from a constant of its own.
        at = _class_qualname_const(co)
        if at is not None and consts[at] == co.co_qualname:
            consts[at] = q
    if q == co.co_qualname and all(a is b for a, b in zip(consts, co.co_consts, strict=True)):
        return co
    return co.replace(co_qualname=q, co_consts=tuple(consts))


_CLASS_BODY_START = frozenset(
    {"RESUME", "NOP", "LOAD_NAME", "STORE_NAME", "COPY_FREE_VARS", "MAKE_CELL"}
)


def _class_qualname_const(co: types.CodeType) -> int | None:
    """The index of the constant a class body's code stores as ``__qualname__`` (None if ``co``
    does not start as a class body does)."""
    last = None
    for ins in dis.get_instructions(co):
        if ins.opname == "LOAD_CONST":
            last = ins.arg
        elif ins.opname == "STORE_NAME" and ins.argval == "__qualname__":
            return last
        elif ins.opname not in _CLASS_BODY_START:
            return None
    return None


class Constants:
    """The constants of a workflow's code, as one compilation makes them.

    CPython compiles a module once and makes its equal constants one object, in every function
    of it: natively ``a = "idle mode"``, an await, then ``b = "idle mode"`` (or ``(1, "x")``, or
    ``2.5``, or a big int) gives ``a is b``, and so does a literal in a nested function and the
    same one in the workflow. The blocks are compiled one by one: each would have its own. So
    every constant of a block (and of the functions, lambdas and classes made in it) is replaced
    by the native function's equal one (which is the module's), else by the first block's.
    Equal means what CPython merges: the same type and value, -0.0 apart from 0.0, a NaN only
    itself, tuples and frozensets item by item.
    """

    def __init__(self, native: types.CodeType) -> None:
        self.pool: dict[Any, Any] = {}
        self._collect(native)

    def _collect(self, co: types.CodeType) -> None:
        for c in co.co_consts:
            if isinstance(c, types.CodeType):
                self._collect(c)
                continue
            k = _const_key(c)
            if k is not None:
                self.pool.setdefault(k, c)

    def merge(self, co: types.CodeType) -> types.CodeType:
        """``co`` (and the code objects among its constants) with the pool's constants."""
        out = []
        changed = False
        for c in co.co_consts:
            if isinstance(c, types.CodeType):
                m = self.merge(c)
            else:
                k = _const_key(c)
                m = c if k is None else self.pool.setdefault(k, c)
            changed = changed or m is not c
            out.append(m)
        return co.replace(co_consts=tuple(out)) if changed else co



def _span(n: Any) -> tuple[int, int, int, int]:
    return (n.lineno, n.col_offset, n.end_lineno, n.end_col_offset)


def _raiser(fn: Any, filename: str, node: ast.AST) -> Any:
    """A function that re-raises its argument at ``node``'s line, in the workflow's name.

    Per await: when a sub-workflow raises into its caller, passing the exception through the
    caller's function adds the caller's ``await helper(...)`` line to the traceback, as native
    code shows it. Per comprehension (3.11): the line of the RuntimeError a StopIteration
    leaving it becomes.
    """
    body: list[ast.stmt] = [ast.Raise(ast.Name("_af_e", ast.Load()), None)]
    args = ast.arguments(
        posonlyargs=[],
        args=[ast.arg("_af_e")],
        vararg=None,
        kwonlyargs=[],
        kw_defaults=[],
        kwarg=None,
        defaults=[],
    )
    kw: dict[str, Any] = {"type_params": []} if _PY312 else {}
    fdef = ast.FunctionDef(fn.__name__, args, body, [], None, None, **kw)
    fill_locations(fdef, node)
    co = compile_tree(ast.Module([fdef], []), filename)
    fcode = next(c for c in co.co_consts if isinstance(c, types.CodeType))
    if hasattr(fcode, "co_qualname"):
        fcode = fcode.replace(co_qualname=fn.__qualname__)
    return types.FunctionType(fcode, {}, fn.__name__)


def _binder(fn: Any, node: ast.AsyncFunctionDef) -> Callable[..., dict[str, Any]]:
    """A plain function with the workflow's signature that returns its bound arguments."""
    a = node.args
    parts: list[str] = []
    pos = a.posonlyargs + a.args
    first_default = len(pos) - len(a.defaults)
    for i, p in enumerate(pos):
        parts.append(p.arg + ("=None" if i >= first_default else ""))
        if a.posonlyargs and i == len(a.posonlyargs) - 1:
            parts.append("/")
    if a.vararg:
        parts.append("*" + a.vararg.arg)
    elif a.kwonlyargs:
        parts.append("*")
    for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
        parts.append(k.arg + ("=None" if d is not None else ""))
    if a.kwarg:
        parts.append("**" + a.kwarg.arg)
    src = f"def {fn.__name__}({', '.join(parts)}):\n    return locals()\n"
    ns: dict[str, Any] = {}
    exec(src, ns)  # noqa: S102  (generated from the workflow's own parameter list)
    binder = ns[fn.__name__]
    binder.__defaults__ = fn.__defaults__
    binder.__kwdefaults__ = fn.__kwdefaults__
    binder.__qualname__ = fn.__qualname__
    return binder  # type: ignore[no-any-return]


__all__ = ["COMPILER_VERSION", "compile_function"]
