"""A ``with`` open across an await whose ``__enter__`` changed the process's state is refused
at the await, naming the ``with`` and what changed.

A checkpoint keeps the context manager, not what its ``__enter__`` did outside the workflow:
restored in another process, the workflow went on in the ``with`` body without that change, and
the manager's ``__exit__`` then undid a change never made there (a zone count went to -1,
``contextlib.chdir`` went back to a directory of the dead process, ``catch_warnings`` recorded
nothing after the await). Managers whose ``__enter__`` changes only themselves, or module data
their class never reads again (a log appended to), are kept as before.
"""

from __future__ import annotations

import contextlib
import os
import warnings

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

ZONES = {"depth": 0}
ROOMS: list[str] = []
SEEN: list[str] = []


class Zone:
    def __enter__(self):
        ZONES["depth"] += 1
        return self

    def __exit__(self, *exc):
        ZONES["depth"] -= 1
        return False


class Room:
    """Pushes its name on a module-level stack; a helper of its class pops it."""

    def __init__(self, name):
        self.name = name

    def __enter__(self):
        ROOMS.append(self.name)
        return self

    def __exit__(self, *exc):
        self._leave()

    def _leave(self):
        ROOMS.pop()


class Logged:
    """Appends to a module-level log its class never reads: a side effect done, kept."""

    def __init__(self):
        self.entered = False

    def __enter__(self):
        SEEN.append("enter")
        self.entered = True
        return self

    def __exit__(self, *exc):
        self.entered = False


@workflow
async def fights_in_a_zone():
    with Zone():
        await timer("t", 1)
        depth = ZONES["depth"]
    return depth, ZONES["depth"]


@workflow
async def waits_in_a_room():
    with Room("boss"):
        await timer("t", 1)
        top = ROOMS[-1]
    return top


@workflow
async def waits_in_a_directory(path):
    with contextlib.chdir(path):
        await timer("t", 1)
        here = os.getcwd()
    return here


@workflow
async def records_warnings():
    with warnings.catch_warnings(record=True) as got:
        warnings.simplefilter("always")
        await timer("t", 1)
        warnings.warn("late", stacklevel=1)
    return [str(w.message) for w in got]


@workflow
async def logs_and_waits():
    with Logged() as g:
        await timer("t", 1)
        inside = g.entered
    with contextlib.suppress(KeyError):
        await timer("u", 1)
        raise KeyError("x")
    return inside, g.entered


@workflow
async def enters_chdir_into_an_exit_stack(path):
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.chdir(path))
        await timer("t", 1)
        here = os.getcwd()
    return here


@workflow
async def holds_an_exited_chdir_and_a_stack_of_suppress(path):
    cd = contextlib.chdir(path)
    with cd:
        pass
    with contextlib.ExitStack() as stack:
        stack.enter_context(contextlib.suppress(KeyError))
        await timer("t", 1)
        raise KeyError("swallowed")
    return cd is not None


def _refusal(wf, *args):
    h = WorkflowHarness(wf, *args, roundtrip=False)
    with pytest.raises(CheckpointError) as e:
        h.checkpoint()
    return str(e.value)


def test_a_manager_changing_module_data_its_exit_reads_is_refused_at_the_await():
    try:
        msg = _refusal(fights_in_a_zone)
    finally:
        ZONES["depth"] = 0
    assert "the context manager of the with at line" in msg
    assert "Zone" in msg and "'STATE'" not in msg and "(ZONES)" in msg, msg
    assert "keep the awaits out of its 'with' body" in msg, msg
    try:
        msg = _refusal(waits_in_a_room)
    finally:
        ROOMS.clear()
    assert "(ROOMS)" in msg, msg


def test_chdir_and_catch_warnings_across_an_await_are_refused(tmp_path):
    here = os.getcwd()
    try:
        msg = _refusal(waits_in_a_directory, str(tmp_path))
    finally:
        os.chdir(here)
    assert "contextlib.chdir" in msg and "the current directory" in msg, msg
    with warnings.catch_warnings():  # puts back what the refused workflow's left entered
        msg = _refusal(records_warnings)
    assert "catch_warnings" in msg and "warnings filters" in msg, msg


def test_a_manager_changing_itself_or_a_log_only_is_kept():
    SEEN.clear()
    h = WorkflowHarness(logs_and_waits, roundtrip=True)
    h.fire_timer("t")
    h.fire_timer("u")
    assert h.result() == (True, False)
    assert SEEN == ["enter"]


def test_a_chdir_entered_into_an_exit_stack_is_refused_and_an_exited_one_kept(tmp_path):
    """Entered through ``ExitStack.enter_context``, the ``with``'s own manager (the stack)
    changed nothing: the entered ``chdir`` in its callbacks is refused wherever it is held."""
    here = os.getcwd()
    try:
        msg = _refusal(enters_chdir_into_an_exit_stack, str(tmp_path))
    finally:
        os.chdir(here)
    assert "ExitStack" in msg and "this chdir is entered" in msg, msg
    h = WorkflowHarness(holds_an_exited_chdir_and_a_stack_of_suppress, str(tmp_path), roundtrip=True)
    h.fire_timer("t")
    assert h.result() is True
    assert os.getcwd() == here
