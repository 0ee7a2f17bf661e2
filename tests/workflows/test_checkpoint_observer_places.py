"""A function the workflow made and registered at several places of module data is put back at
each of them by a restore.

The restore puts an observer the workflow registered back where module data held it, so that
the module calls the restored workflow's function. It was put back at one place only (the first
the walk of module data found): registered in a module list and in a list an instance holds
(``BUS.handlers``), or twice in one list, the other places kept the function of the frames before
the restore, whose calls went to variables the workflow no longer had.
"""

from __future__ import annotations

from workflows import timer, workflow
from workflows.testing import WorkflowHarness


class Bus:
    def __init__(self) -> None:
        self.handlers: list = []


BUS = Bus()
OBSERVERS: list = []


@workflow
async def registers_one_observer_at_three_places(n):
    BUS.handlers.clear()
    OBSERVERS.clear()
    seen = []

    def on_event(v):
        seen.append(v)
        return len(seen)

    BUS.handlers.append(on_event)
    OBSERVERS.append(on_event)
    OBSERVERS.append(on_event)
    await timer("t", 1)
    calls = [f(n) for f in BUS.handlers] + [f(n) for f in OBSERVERS]
    return (
        calls,
        list(seen),
        BUS.handlers[0] is on_event,
        OBSERVERS[0] is on_event,
        OBSERVERS[1] is on_event,
    )


WANT = ([1, 2, 3], [5, 5, 5], True, True, True)


def test_an_observer_registered_at_three_places_is_put_back_at_each():
    h = WorkflowHarness(registers_one_observer_at_three_places, 5, native=True)
    h.fire_timer("t")
    assert h.result() == WANT
    h = WorkflowHarness(registers_one_observer_at_three_places, 5, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == WANT
