"""``procedure`` and ``reducer``: decorators outside a workflow step, commands inside one.

``@procedure`` / ``@procedure(retry=..., timeout=...)`` and ``@reducer`` register a plain function
under ``module:qualname`` and return it unchanged, so it stays an ordinary callable. Inside a
workflow, ``procedure(fn, *args)`` builds the awaitable command and ``reducer(fn, *args)`` records the
reducer call.
"""

from __future__ import annotations

import datetime as _dt
import sys
from collections.abc import Callable
from typing import Any, Concatenate, ParamSpec, TypeVar, overload

from . import _commands, _context
from ._commands import Procedure, ProcedureFunction, RetryPolicy
from ._registry import check_plain, register

F = TypeVar("F", bound=Callable[..., Any])
P = ParamSpec("P")
R = TypeVar("R")
A1 = TypeVar("A1")
A2 = TypeVar("A2")
A3 = TypeVar("A3")
A4 = TypeVar("A4")
A5 = TypeVar("A5")
A6 = TypeVar("A6")
_Seconds = float | _dt.timedelta


def _in_step() -> bool:
    """True if a call of ``procedure(fn)``/``reducer(fn)`` is a command, not a decoration.

    Inside a workflow step it is a command, unless it comes straight from a module's top level:
    that is a module being imported during the step (a lazy import in workflow code), whose
    ``@procedure``/``@reducer`` lines decorate.
    """
    if _context._current.get() is None:
        return False
    return sys._getframe(2).f_code.co_name != "<module>"


# The overloads give a type checker the function's own types: ``await procedure(f, *args)`` is
# ``f``'s return type, and the arguments are checked against ``f``'s parameters. A ParamSpec alone
# cannot do it, because ``timeout=``/``retry=``/``name=`` follow ``*args`` (PEP 612 allows no
# parameter there), so positional arguments get one overload per arity, up to six (a TypeVarTuple
# would do any number, but then mypy words its errors worse: "Too many arguments"); keyword
# arguments for ``f``, or more than six positional ones, go through a ParamSpec, without the
# options (set those on ``@procedure(...)``, or pass ``f``'s arguments positionally).
@overload
def procedure(fn: Callable[P, R], /) -> ProcedureFunction[P, R]: ...  # type: ignore[overload-overlap]  # it is a command too
@overload
def procedure(
    fn: None = None, /, *, retry: RetryPolicy | None = None, timeout: _Seconds | None = None,
    concurrency: int | None = None, rate: float | None = None,
) -> Callable[[F], F]: ...
@overload
def procedure(
    fn: Callable[[], R], /, *,
    timeout: _Seconds | None = None, retry: RetryPolicy | None = None, name: str | None = None,
) -> Procedure[R]: ...
@overload
def procedure(
    fn: Callable[[A1], R], a1: A1, /, *,
    timeout: _Seconds | None = None, retry: RetryPolicy | None = None, name: str | None = None,
) -> Procedure[R]: ...
@overload
def procedure(
    fn: Callable[[A1, A2], R], a1: A1, a2: A2, /, *,
    timeout: _Seconds | None = None, retry: RetryPolicy | None = None, name: str | None = None,
) -> Procedure[R]: ...
@overload
def procedure(
    fn: Callable[[A1, A2, A3], R], a1: A1, a2: A2, a3: A3, /, *,
    timeout: _Seconds | None = None, retry: RetryPolicy | None = None, name: str | None = None,
) -> Procedure[R]: ...
@overload
def procedure(
    fn: Callable[[A1, A2, A3, A4], R], a1: A1, a2: A2, a3: A3, a4: A4, /, *,
    timeout: _Seconds | None = None, retry: RetryPolicy | None = None, name: str | None = None,
) -> Procedure[R]: ...
@overload
def procedure(
    fn: Callable[[A1, A2, A3, A4, A5], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, /, *,
    timeout: _Seconds | None = None, retry: RetryPolicy | None = None, name: str | None = None,
) -> Procedure[R]: ...
@overload
def procedure(
    fn: Callable[[A1, A2, A3, A4, A5, A6], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, /, *,
    timeout: _Seconds | None = None, retry: RetryPolicy | None = None, name: str | None = None,
) -> Procedure[R]: ...
@overload
def procedure(fn: Callable[P, R], /, *args: P.args, **kwargs: P.kwargs) -> Procedure[R]: ...


def procedure(  # type: ignore[misc]  # ``fn`` may also be named in ``**kwargs``
    fn: Any = None,
    *args: Any,
    timeout: float | _dt.timedelta | None = None,
    retry: RetryPolicy | None = None,
    name: str | None = None,
    **kwargs: Any,
) -> Any:
    """Mark ``fn`` as a procedure (decorator), or, inside a workflow, call it as a command.

    As a decorator: ``@procedure`` or ``@procedure(retry=RetryPolicy(...), timeout=5)``.
    In a workflow: ``value = await procedure(fn, *args, timeout=None, retry=None)``.
    """
    if fn is None:
        # (Only the decorator takes these: in a call, keywords are the procedure's own.)
        concurrency, rate = kwargs.pop("concurrency", None), kwargs.pop("rate", None)
        if args or kwargs or name is not None:
            raise TypeError("procedure() needs the procedure function as its first argument")

        def deco(f: F) -> F:
            return _register_procedure(f, timeout, retry, concurrency, rate)

        return deco
    if not args and not kwargs and name is None and not _in_step():
        if timeout is not None or retry is not None:
            return _register_procedure(fn, timeout, retry)
        return _register_procedure(fn, None, None)
    return _commands.procedure(fn, *args, timeout=timeout, retry=retry, name=name, **kwargs)


def _register_procedure(
    fn: F, timeout: Any, retry: RetryPolicy | None, concurrency: Any = None, rate: Any = None
) -> F:
    if not callable(fn):
        raise TypeError(f"@procedure decorates a function, got {fn!r}")
    check_plain(fn, "@procedure")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(f"@procedure retry= must be a RetryPolicy, got {retry!r}")
    opts: dict[str, Any] = _limits(getattr(fn, "__qualname__", repr(fn)), concurrency, rate)
    if timeout is not None:
        opts["timeout"] = _commands._timeout(timeout, f"@procedure {fn.__qualname__} timeout")
    if retry is not None:
        opts["retry"] = retry
    register("procedure", fn, **opts)
    fn.__actorflow_kind__ = "procedure"  # type: ignore[attr-defined]
    return fn


class LimitTypeError(TypeError, ValueError):
    """A ``concurrency=`` or ``rate=`` of the wrong type (``"2"``, ``2.0``): a ``TypeError``, as
    Python raises for one (and as ``timeout=`` and ``RetryPolicy`` do), and the ``ValueError`` of
    a bad limit, which it has always been."""


def _limits(name: str, concurrency: Any, rate: Any) -> dict[str, Any]:
    """``@procedure(concurrency=, rate=)``, checked: the attempts of the procedure running at once
    in one system, and started per second (the runtime holds the others in line)."""
    opts: dict[str, Any] = {}
    if concurrency is not None:
        wrong = isinstance(concurrency, bool) or not isinstance(concurrency, int)
        if wrong or concurrency < 1:
            raise (LimitTypeError if wrong else ValueError)(
                f"@procedure {name}: concurrency= must be a whole number of attempts, 1 or more, "
                f"got {concurrency!r}"
            )
        opts["concurrency"] = concurrency
    if rate is not None:
        wrong = isinstance(rate, bool) or not isinstance(rate, int | float)
        if wrong or not rate > 0 or rate == float("inf"):
            raise (LimitTypeError if wrong else ValueError)(
                f"@procedure {name}: rate= must be a positive number of starts per second, got {rate!r}"
            )
        opts["rate"] = float(rate)
    return opts


@overload
def reducer(fn: F, /) -> F: ...
@overload
def reducer(fn: Callable[Concatenate[Any, P], object], /, *args: P.args, **kwargs: P.kwargs) -> None: ...


def reducer(fn: Any, *args: Any, **kwargs: Any) -> Any:  # type: ignore[misc]  # ``fn`` may also be named in ``**kwargs``
    """Mark ``fn`` as a reducer (decorator), or, inside a workflow, record ``fn(db, *args)``.

    A reducer runs exactly once, in call order, inside the step's own SQLite transaction; ``db`` is
    a ``sqlite_utils.Database`` on that transaction. A reducer that raises rolls the step back.
    """
    if not args and not kwargs and not _in_step():
        if not callable(fn):
            raise TypeError(f"@reducer decorates a function, got {fn!r}")
        check_plain(fn, "@reducer")
        register("reducer", fn)
        fn.__actorflow_kind__ = "reducer"
        return fn
    return _context.reducer(fn, *args, **kwargs)
