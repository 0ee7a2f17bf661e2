"""``select`` refuses two arms it could not tell apart, with advice that can be followed."""

from __future__ import annotations

import pytest

from workflows import request, select, signal, timer


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
