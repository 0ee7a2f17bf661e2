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


# In a new process (after a crash) the import made these empty: the observers the workflow
# registered are put back at their places (a key of the dict, the next place of the list), so
# the module calls the restored workflow's functions there too. They were left out: the places
# led nowhere there, and the module no longer called the workflow.
HANDLERS: dict = {}
LISTENERS: list = []
MODULE = "tests.workflows.test_checkpoint_observer_places"


@workflow
async def registers_observers_a_new_process_lacks(n):
    bonus = n

    def heal(p):
        return p + bonus

    HANDLERS["heal"] = heal
    LISTENERS.append(lambda p: p * bonus)
    await timer("t", 1)
    return ("heal" in HANDLERS and HANDLERS["heal"](10), [f(10) for f in LISTENERS])


def test_observers_registered_under_a_new_key_or_place_are_put_back_in_a_new_process():
    from .diffharness import resume_in_a_new_interpreter

    HANDLERS.clear()
    LISTENERS.clear()
    h = WorkflowHarness(registers_observers_a_new_process_lacks, 5, native=True)
    h.fire_timer("t")
    assert h.result() == (15, [50])
    HANDLERS.clear()
    LISTENERS.clear()
    h = WorkflowHarness(registers_observers_a_new_process_lacks, 5, roundtrip=False)
    blob = h.checkpoint()
    HANDLERS.clear()
    LISTENERS.clear()
    got = resume_in_a_new_interpreter(
        blob, module=MODULE, workflow_type=registers_observers_a_new_process_lacks.__workflow_key__,
        finish=True,
    )
    assert got == (15, [50])


def test_an_observer_the_application_removed_is_not_put_back_in_the_same_process():
    from workflows._compiler import restore, step
    from workflows._context import StepContext

    HANDLERS.clear()
    LISTENERS.clear()
    h = WorkflowHarness(registers_observers_a_new_process_lacks, 5, roundtrip=False)
    blob = h.checkpoint()
    HANDLERS.clear()  # the application unregistered them (natively: they stay unregistered)
    LISTENERS.clear()
    cont = restore(blob)
    key = registers_observers_a_new_process_lacks.__workflow_key__
    with StepContext(workflow_id="w", workflow_type=key, now=2.0).active():
        r = step(cont, send=None)
    assert r.value == (False, [])
    HANDLERS.clear()
