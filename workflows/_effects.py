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
from typing import Any, TypeVar, overload

from . import _commands, _context
from ._commands import RetryPolicy
from ._registry import register

F = TypeVar("F", bound=Callable[..., Any])


def _in_step() -> bool:
    """True if a call of ``procedure(fn)``/``reducer(fn)`` is a command, not a decoration.

    Inside a workflow step it is a command, unless it comes straight from a module's top level:
    that is a module being imported during the step (a lazy import in workflow code), whose
    ``@procedure``/``@reducer`` lines decorate.
    """
    if _context._current.get() is None:
        return False
    return sys._getframe(2).f_code.co_name != "<module>"


@overload
def procedure(fn: F) -> F: ...
@overload
def procedure(
    fn: None = None, *, retry: RetryPolicy | None = ..., timeout: float | None = ...
) -> Callable[[F], F]: ...
@overload
def procedure(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> _commands.Procedure: ...


def procedure(
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
        if args or kwargs or name is not None:
            raise TypeError("procedure() needs the procedure function as its first argument")

        def deco(f: F) -> F:
            return _register_procedure(f, timeout, retry)

        return deco
    if not args and not kwargs and name is None and not _in_step():
        if timeout is not None or retry is not None:
            return _register_procedure(fn, timeout, retry)
        return _register_procedure(fn, None, None)
    return _commands.procedure(fn, *args, timeout=timeout, retry=retry, name=name, **kwargs)


def _register_procedure(fn: F, timeout: Any, retry: RetryPolicy | None) -> F:
    if not callable(fn):
        raise TypeError(f"@procedure decorates a function, got {fn!r}")
    if retry is not None and not isinstance(retry, RetryPolicy):
        raise TypeError(f"@procedure retry= must be a RetryPolicy, got {retry!r}")
    opts: dict[str, Any] = {}
    if timeout is not None:
        opts["timeout"] = _commands._seconds(timeout, f"@procedure {fn.__qualname__} timeout")
    if retry is not None:
        opts["retry"] = retry
    register("procedure", fn, **opts)
    fn.__actorflow_kind__ = "procedure"  # type: ignore[attr-defined]
    return fn


def reducer(fn: Any, *args: Any, **kwargs: Any) -> Any:
    """Mark ``fn`` as a reducer (decorator), or, inside a workflow, record ``fn(db, *args)``.

    A reducer runs exactly once, in call order, inside the step's own SQLite transaction; ``db`` is
    a ``sqlite_utils.Database`` on that transaction. A reducer that raises rolls the step back.
    """
    if not args and not kwargs and not _in_step():
        if not callable(fn):
            raise TypeError(f"@reducer decorates a function, got {fn!r}")
        register("reducer", fn)
        fn.__actorflow_kind__ = "reducer"
        return fn
    return _context.reducer(fn, *args, **kwargs)
