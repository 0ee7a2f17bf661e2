"""``select`` refuses two arms it could not tell apart, with advice that can be followed, and
arms it could never resolve (none); ``gather`` of nothing gives ``[]`` at once, as
``asyncio.gather()`` does."""

from __future__ import annotations

import pytest

from workflows import gather, request, select, signal, spawn, timer, workflow
from workflows.testing import WorkflowHarness


@pytest.mark.parametrize(
    ("arms", "kind"),
    [((signal("a"), signal("a")), "signal"), ((timer("t", 1), timer("t", 2)), "timer"),
     ((request("q"), request("q")), "request")],
    ids=["signals", "timers", "requests"],
)
def test_two_arms_of_one_name_are_refused_without_advising_a_name_they_do_not_take(arms, kind):
    with pytest.raises(ValueError) as info:
        select(*arms)
    message = str(info.value)
    assert f"two {kind} arms named" in message and f"await two different {kind}s" in message
    assert "name=" not in message  # timer(), signal() and request() take no name=
    with pytest.raises(TypeError):
        signal("a", name="b")  # type: ignore[call-arg]


@workflow
async def child(x):
    return x


@workflow
async def gathers_what_it_was_given(items):
    first = await gather(*[spawn(child, x) for x in items])  # none: at once, no step ends
    await timer("t", 1)
    second = await gather()
    return first, second, len(items)


@pytest.mark.parametrize("roundtrip", [False, True])
def test_gather_of_nothing_gives_an_empty_list_at_once(roundtrip):
    h = WorkflowHarness(gathers_what_it_was_given, [], roundtrip=roundtrip)
    h.fire_timer("t")  # the first await that suspends is the timer's
    assert h.result() == ([], [], 0)


def test_select_of_nothing_is_refused():
    with pytest.raises(TypeError, match="select\\(\\) needs at least one command"):
        select()
