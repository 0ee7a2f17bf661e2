"""Classes a module makes by calling a function, which no global names, are the module's own
after a restore in a new process.

``BOSS = make_monster()`` builds an instance of a class made inside ``make_monster``: pickle
cannot find that class by its name (``make_cls.<locals>.Monster``), so a local holding another
instance of it (``type(BOSS)(5)``), or the class itself, came back with a copy of the class made
by the restore: ``isinstance(m, type(BOSS))`` was False after a restart. The class is reached
through the module's instance (``BOSS.__class__``), and written as that way to it.
"""

from __future__ import annotations

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter


def make_cls(tag):
    class Monster:
        kind = tag

        def __init__(self, hp):
            self.hp = hp

    return Monster


BOSS = make_cls("boss")(10)
PACK = [make_cls("wolf")(3), make_cls("wolf")(4)]


class Slotted:
    __slots__ = ("pet",)

    def __init__(self, pet):
        self.pet = pet


KEEPER = Slotted(make_cls("cat")(1))


@workflow
async def holds_an_instance_of_a_made_class():
    m = type(BOSS)(5)
    await timer("t", 1)
    return isinstance(m, type(BOSS)), type(m) is type(BOSS), m.kind, m.hp


@workflow
async def holds_a_made_class():
    k = type(BOSS)
    await timer("t", 1)
    return k is type(BOSS), k(2).hp


@workflow
async def holds_instances_of_classes_of_a_list_and_a_slot():
    w = type(PACK[1])(7)
    c = type(KEEPER.pet)(2)
    await timer("t", 1)
    return type(w) is type(PACK[1]), type(w) is type(PACK[0]), type(c) is type(KEEPER.pet)


def restarted(wf):
    """The outcome of ``wf()`` checkpointed at its first await in one process and restored in
    another."""
    blob = resume_in_a_new_interpreter(None, module=wf.__module__, workflow=wf.__name__)
    return resume_in_a_new_interpreter(blob, module=wf.__module__,
                                       workflow_type=wf.__workflow_key__)


def native(wf):
    h = WorkflowHarness(wf, native=True)
    while not h.done:
        h.send(None)
    return h.result()


def test_an_instance_of_a_class_made_by_a_function_is_of_the_modules_class_in_a_new_process():
    want = (True, True, "boss", 5)
    assert native(holds_an_instance_of_a_made_class) == want
    assert restarted(holds_an_instance_of_a_made_class) == want


def test_a_class_made_by_a_function_is_the_modules_own_in_a_new_process():
    assert restarted(holds_a_made_class) == native(holds_a_made_class) == (True, 2)


def test_classes_of_instances_in_a_list_and_a_slot_are_the_modules_own_in_a_new_process():
    want = (True, False, True)
    assert native(holds_instances_of_classes_of_a_list_and_a_slot) == want
    assert restarted(holds_instances_of_classes_of_a_list_and_a_slot) == want


def test_in_the_same_process_the_made_class_is_itself():
    h = WorkflowHarness(holds_an_instance_of_a_made_class, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == (True, True, "boss", 5)
