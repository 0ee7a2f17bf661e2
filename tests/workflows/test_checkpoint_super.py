"""``super(C, obj)`` held across an await is kept: made again from its class and its object.

pickle has no rule for a ``super`` object (it was refused with "args[0] from __newobj__ args has
the wrong class", naming the variable); the checkpoint writes it as the call that made it, its
object the workflow's own (shared with the local that holds it), in this process and in another.
"""

from __future__ import annotations

from workflows import timer, workflow
from workflows.testing import WorkflowHarness

from .test_checkpoint_made_classes import native, restarted


class Base:
    def hello(self):
        return "base"


class Kid(Base):
    def hello(self):
        return "kid"


@workflow
async def holds_a_super():
    k = Kid()
    bound = super(Kid, k)
    of_class = super(Kid, Kid)
    await timer("t", 1)
    k.name = "changed"  # the super's object is the local's, after the restore too
    return bound.hello(), of_class.hello(k), bound.__self__ is k, bound.__self__.name


WANT = ("base", "base", True, "changed")


def test_a_super_held_across_an_await_is_kept_with_its_object_in_a_new_process():
    assert native(holds_a_super) == WANT
    assert restarted(holds_a_super) == WANT


def test_a_super_held_across_an_await_is_kept_with_its_object_in_this_process():
    h = WorkflowHarness(holds_a_super, roundtrip=True)
    h.fire_timer("t")
    assert h.done and h.result() == WANT
