"""Observable side effects, custom errors and procedures that the corpus workflows use.

Everything here is module level and importable, so a continuation that holds these objects (or
calls these functions after a restore) resolves them by reference. ``log``/``tick`` append to one
ordered list, which is what makes evaluation order observable in the differential comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workflows import procedure, reducer, timer, workflow

LOG: list[Any] = []
MISSING = object()  # a module-level sentinel (identity must survive a restore)


def reset_log() -> None:
    """Empty the side-effect log (every run starts from an empty log)."""
    LOG.clear()
    Fragile.broken = False


def take_log() -> list[Any]:
    """Return the entries logged since the last call, and empty the log."""
    out = list(LOG)
    LOG.clear()
    return out


def log(x: Any) -> Any:
    """Record ``x`` and return it, so it can sit inside any expression."""
    LOG.append(x)
    return x


def tick(n: Any) -> Any:
    """Record that the expression ``tick(n)`` was evaluated now; return ``n``."""
    LOG.append(("tick", n))
    return n


class Boom(Exception):
    """A custom error whose ``__init__`` does not take ``*args``: it needs its own ``__reduce__``."""

    def __init__(self, code: int, detail: str = "") -> None:
        super().__init__(f"boom {code}: {detail}")
        self.code = code
        self.detail = detail

    def __reduce__(self) -> Any:
        return (Boom, (self.code, self.detail))


class Oops(ValueError):
    """A ValueError subclass with plain ``args`` (pickles without help)."""


class CustomErr(Exception):
    """Two-field error used by the generated programs; pickles through ``__reduce__``."""

    def __init__(self, a: Any, b: Any) -> None:
        super().__init__(a, b)
        self.a = a
        self.b = b

    def __reduce__(self) -> Any:
        return (CustomErr, (self.a, self.b))


class Recorder:
    """A picklable context manager that logs enter and exit, and may swallow the exception."""

    def __init__(self, tag: Any, swallow: bool = False) -> None:
        self.tag = tag
        self.swallow = swallow

    def __enter__(self) -> Any:
        log(("enter", self.tag))
        return self.tag

    def __exit__(self, et: Any, ev: Any, tb: Any) -> bool:
        log(("exit", self.tag, None if et is None else et.__name__))
        return self.swallow


class Fragile:
    """A value that cannot be pickled while ``Fragile.broken`` is set (the runs reset it)."""

    broken = False

    def __init__(self, n: int) -> None:
        self.n = n

    def __reduce__(self) -> Any:
        if Fragile.broken:
            raise TypeError("a Fragile cannot be pickled now")
        return (Fragile, (self.n,))


@dataclass
class Box:
    """A mutable record for attribute-target tests (aliasing, augmented assignment)."""

    n: Any = 0
    items: Any = None


@dataclass(frozen=True)
class Point:
    """A class pattern target (``case Point(x=px)``)."""

    x: int
    y: int = 0


# Procedures. The oracle answers them by calling the function itself (they are pure), so the
# result depends on the arguments only.


@procedure
def double(n: int) -> int:
    """Return ``2 * n``."""
    return 2 * n


@procedure
def ident(x: Any) -> Any:
    """Return ``x`` unchanged."""
    return x


@procedure
def plus(a: int, b: int) -> int:
    """Return ``a + b``."""
    return a + b


@procedure
def is_even(n: int) -> bool:
    """Return whether ``n`` is even."""
    return n % 2 == 0


@procedure
def explode(n: int) -> int:
    """Raise ``Oops(n)`` (the oracle turns it into ``ProcedureFailed``)."""
    raise Oops(n)


@procedure
def fetch(n: int) -> int:
    """The generated programs' ``get``: a value the oracle variant may change."""
    return n


@procedure
def risky(n: int) -> int:
    """The generated programs' ``fail``: fails when the oracle variant says so."""
    return n


def get(n: Any, name: str | None = None) -> Any:
    """A command whose result is an int (``fetch(n)`` as the oracle answers it)."""
    return procedure(fetch, n, name=name)


def fail(n: Any, name: str | None = None) -> Any:
    """A command that the oracle may make fail."""
    return procedure(risky, n, name=name)


def halt(v: Any, k: Any) -> Any:
    """``v``, or a ``StopIteration(v)`` raised when ``v`` and ``k`` agree modulo 3 (PEP 479:
    leaving a coroutine, or on 3.11 a comprehension that awaits, it becomes a RuntimeError)."""
    if v % 3 == k % 3:
        raise StopIteration(v)
    return v


def wait(name: str = "t", after: float = 1.0) -> Any:
    """A timer command."""
    return timer(name, after)


@reducer
def note(db: Any, *args: Any) -> None:
    """A reducer the corpus records (never run here: the harness only records the call)."""
    raise AssertionError("reducers are recorded, not run, by the pure harness")


@reducer
def show(db: Any, *args: Any) -> None:
    """A second reducer, so the order of different reducer calls is visible."""
    raise AssertionError("reducers are recorded, not run, by the pure harness")


@workflow
async def sub(n: int) -> int:
    """An inline helper for generated programs: awaits twice, may raise, logs in its finally."""
    try:
        v = await get(n)
        if v > 6:
            raise ValueError(v)
        return v + (await fail(n))
    finally:
        log(("sub", n))


class Loud(int):
    """An int whose truth test is logged, so how often ``__bool__`` runs is observable."""

    def __bool__(self) -> bool:
        log(("bool", int(self)))
        return int(self) != 0
