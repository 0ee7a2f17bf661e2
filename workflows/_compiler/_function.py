"""``WorkflowFunction``: what ``@workflow`` returns, called inline, started, upgraded."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from typing import Any, Generic, ParamSpec, TypeVar

from .._registry import resolve
from ._code import CompiledCode
from ._driver import Continuation
from ._runtime import Frame, SubCall
from ._scope import LOCAL
from ._signals import awaited_signals

P = ParamSpec("P")
R = TypeVar("R")
# An upgrade function: (old point, old locals) -> (new point, new locals), or None.
UpgradeFunction = Callable[[str, dict[str, Any]], "tuple[str, dict[str, Any]] | None"]
U = TypeVar("U", bound=UpgradeFunction)


class WorkflowFunction(Generic[P, R]):
    """A compiled ``@workflow``: call it to await it inline, ``start`` it to get a continuation.

    Generic over the function's parameters ``P`` and return type ``R``, so a type checker checks
    ``await wf(x)``, ``spawn(wf, x)`` and ``system.start(wf, x)`` against them.
    """

    __workflow_key__: str

    def __init__(
        self,
        fn: Callable[P, Coroutine[Any, Any, R]],
        code: CompiledCode,
        binder: Callable[..., Any],
    ) -> None:
        self.__wrapped__ = fn
        self._code = code
        self._binder = binder
        self.__workflow_key__ = code.key
        self.fingerprint = code.fingerprint
        self.__name__ = fn.__name__
        self.__qualname__ = fn.__qualname__
        self.__module__ = fn.__module__
        self.__doc__ = fn.__doc__
        self.__signature__ = inspect.signature(fn)
        self._signal_scan: tuple[frozenset[str] | None, tuple[str, ...]] = (None, ())
        self._upgraders: list[tuple[str, UpgradeFunction]] = []

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> SubCall[R]:
        """An awaitable call: ``await wf(x)`` inside a workflow runs ``wf`` inline."""
        # Bound now, as a native call binds them: a wrong call raises here, not at its await.
        return SubCall(self, args, kwargs, self._binder(*args, **kwargs))

    def start(self, *args: P.args, **kwargs: P.kwargs) -> Continuation:
        """A new continuation with the arguments bound (like the native call); runs nothing."""
        return Continuation(
            [self._new_frame(args, kwargs)], self.__workflow_key__, self.fingerprint
        )

    def _new_frame(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Frame:
        return self._frame_of(self._binder(*args, **kwargs))

    def _frame_of(self, bound: dict[str, Any]) -> Frame:
        f = Frame.__new__(Frame)
        f._af_code = self._code
        d = f.__dict__
        for k, v in bound.items():
            d[LOCAL + k] = v
        d["_af_pc"] = 0
        return f

    @property
    def signal_names(self) -> frozenset[str] | None:
        """The signal names the code awaits (with ``subscribe``'s, and those of the workflows it
        awaits inline), or None when the source does not tell (a name that is not a literal)."""
        if "_signal_names" not in self.__dict__:
            own, inline = self._signal_scan
            self._signal_names = own  # a workflow that awaits itself inline ends the recursion
            g = getattr(self.__wrapped__, "__globals__", {})
            self._signal_names = awaited_signals(own, inline, g.get)
        names: frozenset[str] | None = self._signal_names
        return names

    def upgrade(self, from_version: str) -> Callable[[U], U]:
        """Register a function that moves continuations made by an older version of this code.

        ``from_version`` is the old code's fingerprint, or a prefix of it of at least 8 hex digits
        (as ``wf show`` and the ``VersionMismatch`` message print it). The function is called as
        ``fn(point, locals)`` with the old point's identity (``"timer 'walk' #1"``) and a dict of
        the old frame's locals, and returns ``(new_point, new_locals)``: the identity of an await
        of the new code and the locals to resume there with (every local live there must be
        given). It may return None to leave that point to the automatic rules. Its answer is
        checked before anything is stored; a wrong answer (or an exception) keeps the workflow
        held, with the reason.
        """
        if (
            not isinstance(from_version, str)
            or len(from_version) < 8
            or not all(c in "0123456789abcdef" for c in from_version)
        ):
            raise ValueError(
                f"{self.__workflow_key__}.upgrade(from_version={from_version!r}): give the old "
                "code's fingerprint, or its first 8 or more hex digits (lower case)"
            )
        if self.fingerprint.startswith(from_version):
            raise ValueError(
                f"{self.__workflow_key__}.upgrade(from_version={from_version!r}): that is this "
                "code's own fingerprint; give the fingerprint of the old code the stored "
                "continuations were made by"
            )

        def register_upgrade(fn: U) -> U:
            if not callable(fn):
                raise TypeError(f"@{self.__name__}.upgrade(...) decorates a function, got {fn!r}")
            self._upgraders.append((from_version, fn))
            return fn

        return register_upgrade

    def upgrader_for(self, fingerprint: str) -> UpgradeFunction | None:
        """The upgrade function registered for continuations made by code ``fingerprint``."""
        found = [fn for v, fn in self._upgraders if fingerprint.startswith(v)]
        return found[-1] if found else None

    def __reduce__(self) -> Any:
        return (resolve, ("workflow", self.__workflow_key__))

    def __repr__(self) -> str:
        return f"<workflow {self.__workflow_key__}>"


__all__ = ["UpgradeFunction", "WorkflowFunction"]
