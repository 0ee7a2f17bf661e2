"""A checkpoint writes a module-level container the workflow holds, or loops over, by its name:
no pass of it writes the container's items by value, however many there are.

A game server keeps its registries at module level (``PLAYERS``, ``ITEMS``): a workflow holding
one (``players = PLAYERS``) or looping over one (``for name in PLAYERS: await ...``) must not pay
for its size at every checkpoint. Each item here counts the times pickle asks it how to write it
by value: a checkpoint must ask none of them, and the workflow must go on as natively after a
restore.
"""

from __future__ import annotations

from collections import OrderedDict, deque

import pytest

from workflows import signal, workflow
from workflows._compiler import checkpoint, restore, step
from workflows._step import Finished, Suspended


class Counted:
    """An item of module data that counts how often it is written by value."""

    reduced = 0

    def __init__(self, n: int) -> None:
        self.n = n

    def __reduce__(self) -> tuple[type, tuple[int]]:
        Counted.reduced += 1
        return (Counted, (self.n,))


# Longer than the order a checkpoint records of a container a loop goes over (256 items), and
# shorter.
REGISTRY = {f"k{i}": Counted(i) for i in range(300)}
SMALL = {f"k{i}": Counted(i) for i in range(10)}
ROSTER = [Counted(i) for i in range(300)]
ORDERED = OrderedDict((f"k{i}", Counted(i)) for i in range(300))
QUEUE = deque(Counted(i) for i in range(300))


@workflow
async def holds_it() -> int:
    registry = REGISTRY
    total = 0
    for _ in range(3):
        total += await signal("x")
    return total + len(registry)


@workflow
async def holds_two() -> int:
    registry, roster = REGISTRY, ROSTER
    total = await signal("x")
    total += await signal("x")
    return total + len(registry) + len(roster)


@workflow
async def loops_over_keys() -> list[str]:
    seen = []
    for name in REGISTRY:
        seen.append(name)
        if len(seen) <= 3:
            await signal("x")
    return seen


@workflow
async def loops_over_a_small_dict() -> list[str]:
    seen = []
    for name in SMALL:
        seen.append(name)
        await signal("x")
    return seen


@workflow
async def walks_a_list() -> int:
    roster = iter(ROSTER)
    total = 0
    for _ in range(3):
        total += next(roster).n + await signal("x")
    return total


@workflow
async def holds_iterators() -> list[str]:
    keys = iter(REGISTRY)
    od = iter(ORDERED)
    items = iter(QUEUE)
    out = [next(keys), next(od)]
    next(items)
    await signal("x")
    out += [next(keys), next(od)]
    await signal("x")
    return out + [next(keys), str(next(items).n)]


@pytest.mark.parametrize(
    ("wf", "expected"),
    [
        (holds_it, 3 + 300),
        (holds_two, 2 + 600),
        (loops_over_keys, list(REGISTRY)),
        (loops_over_a_small_dict, list(SMALL)),
        (walks_a_list, 0 + 1 + 2 + 3),
        (holds_iterators, ["k0", "k0", "k1", "k1", "k2", "1"]),
    ],
    ids=lambda x: getattr(x, "__name__", ""),
)
def test_module_data_is_written_by_name_and_goes_on_as_natively(wf: object, expected: object) -> None:
    cont = wf.start()  # type: ignore[attr-defined]
    result = step(cont)
    while isinstance(result, Suspended):
        Counted.reduced = 0
        blob = checkpoint(cont)
        assert Counted.reduced == 0, f"{Counted.reduced} items of module data written by value"
        assert len(blob) < 4_000  # a name and a position, not 300 items
        cont = restore(blob)
        result = step(cont, 1)
    assert isinstance(result, Finished), result
    assert result.value == expected
