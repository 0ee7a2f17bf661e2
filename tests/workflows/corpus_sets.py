"""Workflows over sets driven by a list of operations, for the set-table tests
(test_set_tables.py): checkpointed and restored in this process and in others."""

from __future__ import annotations

from typing import Any

from workflows import timer, workflow


def apply(s: set[Any], op: tuple[Any, ...], log: list[Any]) -> None:
    """Carry out one operation on ``s``, logging what it shows."""
    kind = op[0]
    if kind == "add":
        s.add(op[1])
    elif kind == "discard":
        s.discard(op[1])
    elif kind == "pop":
        log.append(("pop", s.pop() if s else None))
    elif kind == "clear":
        s.clear()
    elif kind == "list":
        log.append(("list", list(s)))
    elif kind == "update":
        s.update(op[1])
    else:
        raise ValueError(f"unknown set operation {op!r}")


@workflow
async def set_operations(ops, loop_ops=()):
    """Carry out ``ops`` on one set, awaiting a timer at each "await"; then loop over the set,
    awaiting at each turn and carrying out the next of ``loop_ops`` after it (a change of size
    raises at the next turn; an add and a discard keep the loop going by its slot)."""
    s: set = set()
    log: list = []
    n = 0
    for op in ops:
        if op[0] == "await":
            n += 1
            await timer(f"t{n}", 1)
        else:
            apply(s, op, log)
    turn = 0
    try:
        for x in s:
            log.append(("loop", x))
            n += 1
            await timer(f"t{n}", 1)
            for op in loop_ops[turn : turn + 2]:
                apply(s, op, log)
            turn += 2
            if n > 60:
                break
    except RuntimeError as e:
        log.append(("raised", str(e)))
    return log, list(s), len(s)


class Marker:
    """Module-level objects hashed by their address."""


def first():
    return 1


def second():
    return 2


MODULE_OBJECTS = [None, first, second, Marker, *(Marker() for _ in range(5)), len, apply]


def name_of(x: Any) -> str:
    if x is None:
        return "None"
    return getattr(x, "__qualname__", None) or f"marker {MODULE_OBJECTS.index(x)}"


@workflow
async def module_objects():
    """A set of the module's functions and classes, objects of its list, builtins and None
    (all hashed by their address: None before 3.12), with dummy slots, held across an await."""
    s = set(MODULE_OBJECTS)
    s.discard(MODULE_OBJECTS[4])
    s.discard(MODULE_OBJECTS[5])
    await timer("t", 1)
    return [name_of(x) for x in s], len(s)
