"""An instance of a class of another of the application's modules, held by a module global,
is looked into like an instance of the module's own classes.

``HOLD = Settings()`` (the class imported from another module), ``BAG = make_bag()`` (made by
another module's function) or an item of ``from .moddata_items import MONSTERS``: a local
holding what such an instance holds (``rules = HOLD.rules``) came back from a restore as a copy,
in the process that took the checkpoint too, so ``rules.append(...)`` after the await no longer
changed ``HOLD.rules``. Only instances of classes of the workflow's own module, or of a module
it names a class, function or module of, were looked into.
"""

from __future__ import annotations

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .moddata import Settings
from .moddata_deep import make_bag
from .moddata_items import MONSTERS
from .test_checkpoint_made_classes import native, restarted

HOLD = Settings()
BAG = make_bag()


@workflow
async def holds_what_foreign_instances_hold():
    HOLD.rules = []
    BAG.items = []
    MONSTERS[1].loot = []
    rules, items, loot = HOLD.rules, BAG.items, MONSTERS[1].loot
    await timer("t", 1)
    rules.append("no running")
    items.append("sword")
    loot.append("club")
    return (
        (rules is HOLD.rules, items is BAG.items, loot is MONSTERS[1].loot),
        (list(HOLD.rules), list(BAG.items), list(MONSTERS[1].loot)),
    )


WANT = ((True, True, True), (["no running"], ["sword"], ["club"]))


def test_what_a_foreign_instance_holds_is_the_modules_after_a_restore():
    assert native(holds_what_foreign_instances_hold) == WANT
    h = WorkflowHarness(holds_what_foreign_instances_hold, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == WANT


def test_what_a_foreign_instance_holds_is_the_modules_in_a_new_process():
    assert restarted(holds_what_foreign_instances_hold) == WANT
