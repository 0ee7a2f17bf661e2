"""A local holding an object of module data, restored in the process that checkpointed it after
module data changed there, is that object, not whatever is at its old place now.

The checkpoint writes such a local as its path (``HEROES[0]``, ``BOSSES["ogre"]``). Restored in
the same process (a passivated workflow loaded again, a step rolled back) after another workflow
or the module's own code put another object at that place (``HEROES.insert(0, ...)``,
``BOSSES["ogre"] = Boss(...)``), the local came back as that other object, silently. Now the
path must lead to the very object the checkpoint was written for; where it does not, the object
is found where module data holds it now, else (module data let go of it) the local gets back
the value it held, as natively.
"""

from __future__ import annotations

import pytest

from workflows import timer, workflow
from workflows._compiler import restore, step
from workflows._context import StepContext
from workflows.testing import WorkflowHarness

from . import moddata_items


class Hero:
    def __init__(self, name):
        self.name = name
        self.hp = 10


HEROES = [Hero("ann"), Hero("bob")]
BOSSES = {"ogre": Hero("ogre")}
_IMPORTED = (list(HEROES), dict(BOSSES))


@pytest.fixture(autouse=True)
def _module_data_as_imported():
    yield
    HEROES[:] = _IMPORTED[0]
    BOSSES.clear()
    BOSSES.update(_IMPORTED[1])
    for h in (*_IMPORTED[0], *_IMPORTED[1].values()):
        h.hp = 10


@workflow
async def holds_a_hero_and_a_boss():
    hero = HEROES[0]
    boss = BOSSES["ogre"]
    hero.hp -= 1
    await timer("t", 1)
    hero.hp -= 1
    return (
        hero.name, hero.hp, any(h is hero for h in HEROES),
        boss.name, boss is BOSSES["ogre"],
    )


def replace():
    """Another object put at each place."""
    HEROES[0] = Hero("intruder")
    BOSSES["ogre"] = Hero("troll")


def move():
    """The hero moved to another place of the list; the boss left alone."""
    HEROES.insert(0, Hero("intruder"))


def native(change):
    h = WorkflowHarness(holds_a_hero_and_a_boss, native=True)
    change()
    h.fire_timer("t")
    return h.result()


def restored(change):
    h = WorkflowHarness(holds_a_hero_and_a_boss, roundtrip=False)
    blob = h.checkpoint()
    change()
    cont = restore(blob)
    key = holds_a_hero_and_a_boss.__workflow_key__
    with StepContext(workflow_id="w", workflow_type=key, now=1.0).active():
        return step(cont, send=None).value


@pytest.mark.parametrize(
    ("change", "want"),
    [
        (replace, ("ann", 8, False, "ogre", False)),
        (move, ("ann", 8, True, "ogre", True)),
        (lambda: None, ("ann", 8, True, "ogre", True)),
    ],
    ids=["replaced", "moved", "unchanged"],
)
def test_a_local_of_module_data_is_its_object_after_module_data_changed(change, want):
    assert native(change) == want
    HEROES[:] = _IMPORTED[0]
    BOSSES.update(_IMPORTED[1])
    HEROES[0].hp = 10
    assert restored(change) == want


@workflow
async def holds_a_monster_of_another_module():
    m = moddata_items.MONSTERS[1]
    await timer("t", 1)
    return m.name, m is moddata_items.MONSTERS[2]


def test_an_object_of_another_modules_data_moved_since_is_that_object():
    """The same for another module's data: the monster moved to another place of its list."""
    before = list(moddata_items.MONSTERS)
    h = WorkflowHarness(holds_a_monster_of_another_module, roundtrip=False)
    blob = h.checkpoint()
    try:
        moddata_items.MONSTERS.insert(0, moddata_items.Monster("intruder"))
        cont = restore(blob)
        key = holds_a_monster_of_another_module.__workflow_key__
        with StepContext(workflow_id="w", workflow_type=key, now=1.0).active():
            assert step(cont, send=None).value == ("troll", True)
    finally:
        moddata_items.MONSTERS[:] = before
