"""Corpus (Python 3.12+): type parameters made in a workflow, held across awaits.

``class Box[T]``, ``def first[U](...)``, a ``**P`` and a ``*Ts``: each parameter is made when
the class or function is, in the workflow; after a restore (in a new process too) the class and
function have their parameters back, with their bounds, constraints, inferred variance and
(3.13) defaults, and the same parameter object wherever the class and its parts hold it.
"""

from __future__ import annotations

import sys
import typing

from workflows import timer, workflow

from .diffharness import C, add

HAS_DEFAULTS = sys.version_info >= (3, 13)


def tick(n: int = 1):
    return timer("t", n)


def describe(p):
    """What a type parameter is, as data (its kind, name, bound, constraints, variance)."""
    return (
        type(p).__name__,
        p.__name__,
        getattr(p, "__bound__", None),
        getattr(p, "__constraints__", ()),
        getattr(p, "__infer_variance__", None),
        getattr(p, "__covariant__", None),
        p.has_default() if HAS_DEFAULTS else None,
        p.__default__ if HAS_DEFAULTS and p.has_default() else None,
    )


@workflow
async def generic_class_and_function(n):
    """A generic class and function made in the workflow, used on both sides of awaits."""

    class Registry[T: (int, str), **P, *Ts]:
        def __init__(self):
            self.items: list[T] = []

    def first[U: int](xs: list[U]) -> U:
        return xs[0]

    reg = Registry()
    reg.items.append(n)
    await tick()
    reg.items.append(first([n + 1]))
    await tick()
    params = Registry.__type_params__
    return (
        [describe(p) for p in params],
        [describe(p) for p in first.__type_params__],
        reg.items,
        typing.get_origin(Registry[int, [str], int]) is Registry,
    )


add(generic_class_and_function, C(0), C(1), C(5))


@workflow
async def type_params_made_by_calls(n):
    """TypeVar, ParamSpec and TypeVarTuple called in the workflow (with defaults on 3.13)."""
    extra = {"default": int} if HAS_DEFAULTS else {}
    t = typing.TypeVar("T", bound=int, **extra)
    p = typing.ParamSpec("P", **({"default": [str]} if HAS_DEFAULTS else {}))
    ts = typing.TypeVarTuple("Ts")
    alias = list[t]
    await tick()
    held = [t, p, ts][: n + 1]
    await tick()
    return [describe(x) for x in held], typing.get_args(alias)[0] is t, held[0] is t


add(type_params_made_by_calls, C(0), C(1), C(2))
