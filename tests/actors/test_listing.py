"""The ActorSystem's listing of workflows (SPEC §5): ``workflows(status=None, type=None)``."""

from __future__ import annotations

import pytest

from . import flows
from .runtime_support import T


def test_workflows_filters_by_the_function_its_key_or_its_name_alone(system):
    a = system.start(flows.waits_once, id="a")
    system.start(flows.child, 1, 0.0, id="c")
    system.idle(timeout=T)
    for by in (flows.waits_once, "tests.actors.flows:waits_once", "waits_once"):
        assert [i.id for i in system.workflows(type=by)] == [a.id]
    assert system.workflows(type="nothing_of_that_name") == []
    assert [i.id for i in system.workflows(status="running", type="waits_once")] == ["a"]


def test_an_unknown_status_is_refused_naming_the_statuses(system):
    """`workflows(status="done")` says which statuses there are (it said only "'done' is not a
    valid Status")."""
    with pytest.raises(ValueError) as info:
        system.workflows(status="done")
    message = str(info.value)
    assert "'done'" in message
    for status in ("'running'", "'completed'", "'failed'", "'cancelled'"):
        assert status in message


def test_a_type_that_is_no_workflow_nor_name_is_refused(system):
    """`workflows(type=5)` (or a plain function) is a TypeError saying what to give; it listed
    nothing, as for a type no workflow has."""
    system.start(flows.waits_once, id="a")
    for bad in (5, print):
        with pytest.raises(TypeError, match=r"give the @workflow function, its module:qualname or its name"):
            system.workflows(type=bad)
