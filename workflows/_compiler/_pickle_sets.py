"""Sets in a checkpoint: the table a set is recorded with, and frozensets whose order a rebuild
would change.
"""

from __future__ import annotations

import sys
from typing import Any

from . import _settable


def _same_order(s: set[Any] | frozenset[Any], order: list[Any]) -> bool:
    return len(s) == len(order) and all(a is b for a, b in zip(s, order, strict=True))


class SetNotRestorable(Exception):
    """A set of a checkpoint whose table cannot be rebuilt in this process; ``frames`` is what
    was unpickled (the set holds its elements in another table), to name the variable by."""

    def __init__(self, reason: str, the_set: set[Any], frames: Any) -> None:
        super().__init__(reason)
        self.reason = reason
        self.the_set = the_set
        self.frames = frames


def _set_record(s: set[Any]) -> Any:
    """What a checkpoint records of set ``s`` beside its elements: its exact table; TypeError
    if a restore could not rebuild it."""
    if not _settable.SUPPORTED:
        raise TypeError(
            f"a set of {len(s)} elements whose hash table this interpreter ({sys.version.split()[0]}, "
            f"{sys.implementation.name}) does not let a checkpoint record, so a restore could not "
            "give it back with the same order and later behaviour; hold sorted(...) or a "
            "dict.fromkeys(...) of its elements across the await"
        )
    table = _settable.read(s)
    problem = _settable.problem(table)
    if problem is not None:
        raise TypeError(
            f"a set of {len(s)} elements whose hash table a restore cannot rebuild ({problem}); "
            "hold sorted(...) or a dict.fromkeys(...) of its elements across the await"
        )
    return table.record()


def _frozenset_problem(f: frozenset[Any]) -> str | None:
    order = list(f)
    again = frozenset(order)  # what pickle rebuilds it as
    if _settable.SUPPORTED:
        if _settable.read(again) == _settable.read(f):
            return None
    elif _same_order(again, order):
        return None
    return (
        f"a frozenset of {len(f)} elements whose iteration order a restore cannot reproduce (a "
        "rebuilt frozenset lays its elements out anew, in another table); hold a set, or a "
        "tuple(sorted(...)), across the await"
    )
