"""Exceptions in a checkpoint: their state beyond ``args`` (attributes, ``__slots__``, the
attributes CPython keeps outside both, notes, cause, context) and their traceback as data.
"""

from __future__ import annotations

import ast
import builtins
import inspect
import itertools
import sys
import types
from typing import Any

from ._ast import compile_tree
from ._pickle_modules import HEAPTYPE, slot_values

_PY311 = sys.version_info >= (3, 11)
_PY312 = sys.version_info >= (3, 12)


# --------------------------------------------------------------------------------------------
# Exceptions


def _check_rebuildable(e: BaseException, func: Any, args: Any) -> None:
    """Raise TypeError now if ``func(*args)`` (the exception's own reduce) cannot rebuild ``e``."""
    if not isinstance(func, type) or not isinstance(args, tuple):
        return
    problem = _signature_problem(func, len(args))
    if problem is not None:
        raise TypeError(
            f"{e!r} cannot be rebuilt at restore: its class is called "
            f"with its args {args!r} and {problem}; pass every argument of __init__ on to "
            "super().__init__(...), or give the class a __reduce__"
        )


_SIG_PROBLEMS: dict[tuple[type, int], str | None] = {}


def _signature_problem(cls: type, nargs: int) -> str | None:
    key = (cls, nargs)
    try:
        return _SIG_PROBLEMS[key]
    except KeyError:
        pass
    problem = None
    for meth_name in ("__new__", "__init__"):
        meth = None
        for klass in cls.__mro__:
            if meth_name in klass.__dict__:
                meth = klass.__dict__[meth_name]
                break
        if isinstance(meth, staticmethod):
            meth = meth.__func__
        if not isinstance(meth, types.FunctionType):
            continue  # the builtin exception constructors take any args
        try:
            sig = inspect.signature(meth)
            sig.bind(cls, *range(nargs))
        except TypeError as err:
            problem = f"{cls.__qualname__}.{meth_name} refuses them ({err})"
            break
        except ValueError:
            continue
    if len(_SIG_PROBLEMS) > 1024:
        _SIG_PROBLEMS.clear()
    _SIG_PROBLEMS[key] = problem
    return problem


def _tb_entries(tb: types.TracebackType | None) -> tuple[tuple[Any, ...], ...] | None:
    """A traceback as data: per entry its file, line, function names and column positions."""
    if tb is None:
        return None
    out = []
    while tb is not None:
        out.append(_tb_entry_of(tb))
        tb = tb.tb_next
    return tuple(out)


def _tb_entry_of(tb: types.TracebackType) -> tuple[Any, ...]:
    """One entry of a traceback as data: its file, line, function names and column positions."""
    code = tb.tb_frame.f_code
    pos: tuple[Any, ...] = (None, None, None, None)
    if _PY311 and tb.tb_lasti >= 0:
        pos = next(itertools.islice(code.co_positions(), tb.tb_lasti // 2, None), pos)
    return (code.co_filename, tb.tb_lineno, code.co_name, getattr(code, "co_qualname", code.co_name), pos)


_TB_FRAMES: dict[tuple[Any, ...], tuple[types.FrameType, int]] = {}


def _tb_frame(entry: tuple[Any, ...]) -> tuple[types.FrameType, int]:
    """A finished frame of a stub in ``entry``'s file and function, raising at its position."""
    try:
        return _TB_FRAMES[entry]
    except KeyError:
        pass
    filename, lineno, name, qualname, pos = entry
    ln = pos[0] if pos[0] is not None else (lineno if lineno is not None else 1)
    eln = pos[1] if pos[1] is not None else ln
    col = pos[2] if pos[2] is not None else -1  # no columns: printed without carets
    ecol = pos[3] if pos[3] is not None else -1
    ident = name if name.isidentifier() else "_af_stub"
    raise_ = ast.Raise(ast.Name("_af_e", ast.Load()), None)
    raise_.lineno, raise_.end_lineno, raise_.col_offset, raise_.end_col_offset = ln, eln, col, ecol
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
    fdef = ast.FunctionDef(ident, args, [raise_], [], None, None, **kw)
    ast.fix_missing_locations(ast.copy_location(fdef, raise_))
    for n in ast.walk(fdef):
        if isinstance(n, ast.Name):
            n.lineno, n.end_lineno, n.col_offset, n.end_col_offset = ln, eln, col, ecol
    co = compile_tree(ast.Module([fdef], []), filename)
    fcode = next(c for c in co.co_consts if isinstance(c, types.CodeType))
    fcode = fcode.replace(co_name=name)
    if hasattr(fcode, "co_qualname"):
        fcode = fcode.replace(co_qualname=qualname)
    stub = types.FunctionType(fcode, {"__builtins__": builtins})
    try:
        stub(_Marker())
    except _Marker as m:
        t = m.__traceback__
        assert t is not None and t.tb_next is not None
        frame, lasti = t.tb_next.tb_frame, t.tb_next.tb_lasti
        t = None
    frame.clear()
    if len(_TB_FRAMES) > 4096:
        _TB_FRAMES.clear()
    _TB_FRAMES[entry] = (frame, lasti)
    return frame, lasti


class _Marker(Exception):
    pass


_UNSET = object()


def reduce_traceback(pickler: Any, tb: types.TracebackType) -> Any:
    """A traceback object held by the workflow (``et, ev, tb = sys.exc_info()``), or an
    exception's: each of its entries made again from its file, line and function, linked to the
    next as it was, so that one held beside its exception is still that exception's after a
    restore, and an entry two chains share (an exception raised again, which puts a new entry
    before the one it had) is one object still.

    The entries after ``tb`` are handed to pickle first, last one first, in a list (each written
    with its next one already written: however long the chain, pickle never recurses along it);
    then ``tb`` is made with the first of them as its next.
    """
    linked = pickler.__dict__.setdefault("_af_tb_linked", set())
    if id(tb) in linked:
        return (_tb_entry, (_tb_entry_of(tb), tb.tb_next))  # its next one is written before it
    rest = []
    nxt = tb.tb_next
    while nxt is not None:
        rest.append(nxt)
        nxt = nxt.tb_next
    linked.update(map(id, rest))
    rest.reverse()
    return (_tb_before, (_tb_entry_of(tb), rest))


def _tb_entry(entry: tuple[Any, ...], nxt: types.TracebackType | None) -> types.TracebackType:
    frame, lasti = _tb_frame(entry)
    lineno = entry[1] if entry[1] is not None else frame.f_lineno
    return types.TracebackType(nxt, frame, lasti, lineno)


def _tb_before(entry: tuple[Any, ...], rest: list[types.TracebackType]) -> types.TracebackType:
    """The entry made from ``entry`` before the last of ``rest`` (the entries after it, last one
    first)."""
    return _tb_entry(entry, rest[-1] if rest else None)


def _rebuild_tb(entries: tuple[tuple[Any, ...], ...] | None) -> types.TracebackType | None:
    tb = None
    if not entries:
        return None
    for entry in reversed(entries):
        frame, lasti = _tb_frame(entry)
        lineno = entry[1] if entry[1] is not None else frame.f_lineno
        tb = types.TracebackType(tb, frame, lasti, lineno)
    return tb


def _set_exc_state(e: BaseException, st: tuple[Any, ...]) -> None:
    state, attrs, cause, context, suppress, tb = st[:6]
    for k, v in (st[6] if len(st) > 6 else None) or ():  # its fields and slots
        # Only where the rebuild left another value: a field never set (NULL, read as None) is
        # not the same as one set to None (OSError's str tells them apart).
        if getattr(e, k, _UNSET) is not v:
            setattr(e, k, v)
    if state is not None:
        setstate = getattr(e, "__setstate__", None)
        if setstate is not None:
            setstate(state)
        elif isinstance(state, dict):
            e.__dict__.update(state)
    if attrs:
        e.__dict__.update(attrs)
    e.__cause__ = cause
    e.__context__ = context
    e.__suppress_context__ = suppress
    # (the traceback object itself, shared with whatever else held it; a checkpoint written
    # before tracebacks were pickled as objects holds its entries)
    e.__traceback__ = _rebuild_tb(tb) if isinstance(tb, tuple) else tb


def _outside_state(e: BaseException) -> tuple[tuple[str, Any], ...] | None:
    """What ``e`` holds beyond its args and ``__dict__``: the fields of the builtin exception
    classes it derives from, which the interpreter or the program may set after it was made
    (``AttributeError.name``, ``SyntaxError.lineno``, ``StopIteration.value``,
    ``OSError.strerror``, ``BlockingIOError.characters_written``...), and its ``__slots__``."""
    out = []
    for n in _fields_of(type(e)):
        try:
            out.append((n, getattr(e, n)))
        except AttributeError:  # not set (``characters_written`` before a write)
            pass
    out.extend(slot_values(e).items())
    return tuple(out) or None


# Fields of the builtin exceptions that are not their args nor what every exception has (its
# cause, context and traceback are kept apart); an exception group's own two are its args.
_NOT_FIELDS = frozenset({
    "args", "__traceback__", "__context__", "__cause__", "__suppress_context__", "__dict__",
    "__weakref__", "message", "exceptions",
})
_FIELDS: dict[type, tuple[str, ...]] = {}


def _fields_of(cls: type) -> tuple[str, ...]:
    """The settable fields ``cls`` has from the builtin exception classes it derives from."""
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    names: dict[str, None] = {}
    for klass in cls.__mro__:
        if not issubclass(klass, BaseException) or klass.__flags__ & HEAPTYPE:
            continue
        for k, v in vars(klass).items():
            if k not in _NOT_FIELDS and isinstance(v, _FIELD_KINDS):
                names[k] = None
    fields = tuple(names)
    if len(_FIELDS) > 1024:
        _FIELDS.clear()
    _FIELDS[cls] = fields
    return fields


_FIELD_KINDS = (types.MemberDescriptorType, types.GetSetDescriptorType)


def _own_init(cls: type) -> bool:
    """Whether calling ``cls`` runs an ``__init__`` of the application's (defined in Python)."""
    for klass in cls.__mro__:
        if "__init__" in klass.__dict__:
            return isinstance(klass.__dict__["__init__"], types.FunctionType)
    return False


def _reduce_exception(e: BaseException, proto: int) -> Any:
    rv = e.__reduce_ex__(proto)
    if isinstance(rv, str):
        return NotImplemented
    func, args = rv[0], rv[1]
    state = rv[2] if len(rv) > 2 else None
    # Pickle's way, ``type(e)(*e.args)``, runs the class's own ``__init__`` again on the args it
    # passed on to ``super().__init__``, which are seldom the arguments it was called with
    # (``__init__(self, who, item=None)`` formats both into one message): called with the message
    # alone it failed, or, given a default, made another message silently. Such an exception is
    # made bare and given back its args with its fields, its ``__dict__`` and the rest of its
    # state: what it was, whatever its ``__init__`` does. (A class's own ``__reduce__`` is
    # followed, and the builtin exceptions are still made by their class, which sets their
    # internal fields; an exception group keeps its members only when made by its class.)
    bare = (func is type(e) and args is e.args and _own_init(func)
            and not isinstance(e, BaseExceptionGroup))
    if not bare:
        _check_rebuildable(e, func, args)
    d = getattr(e, "__dict__", None)
    attrs = dict(d) if d and d is not state else None
    st = (
        state,
        attrs,
        e.__cause__,
        e.__context__,
        e.__suppress_context__,
        e.__traceback__,
        _outside_state(e),
    )
    listitems = rv[3] if len(rv) > 3 else None
    dictitems = rv[4] if len(rv) > 4 else None
    if bare or (func is type(e) and _holds_through_tuples(args, e)):
        # ``e.args = (e,)``: made by its class from args that hold it, it would be needed before
        # it exists (pickle recurses without end). Made bare first, its args set with its fields.
        st = (*st[:6], (("args", args), *(st[6] or ())))
        return (_bare_exception, (func,), st, listitems, dictitems, _set_exc_state)
    return (func, args, st, listitems, dictitems, _set_exc_state)


def _holds_through_tuples(value: Any, e: BaseException) -> bool:
    """Whether ``value`` holds ``e`` through tuples and frozensets alone (which pickle builds
    from their items, so ``e`` would be needed to make them); a list, dict or set, made empty
    first and filled after, breaks such a cycle on its own."""
    stack, seen = [value], 0
    while stack and seen < 10_000:
        v = stack.pop()
        seen += 1
        if v is e:
            return True
        if type(v) is tuple or type(v) is frozenset:
            stack.extend(v)
    return False


def _bare_exception(cls: type[BaseException]) -> BaseException:
    """An instance of ``cls`` made without arguments (they are set after, with its fields)."""
    try:
        return cls.__new__(cls)
    except TypeError:  # a __new__ of its own that needs its arguments
        return BaseException.__new__(cls)
