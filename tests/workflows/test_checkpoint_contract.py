"""The checkpoint contract (docs/reference.md, "What a checkpoint keeps"), case by case.

The index of module data a checkpoint keeps by reference is reused while module data is as it
found it, and rebuilt when it changed (a container grew, an item was replaced, a global or a
class attribute rebound); values a restore could not give back are refused at the checkpoint,
naming the variable and the fix, also where the interpreter's layout is not the one the
checkpoint knows.
"""

from __future__ import annotations

import textwrap

import pytest

import workflows
from workflows import CheckpointError
from workflows._compiler import (
    _memview,
    _pickle_modules,
    _settable,
    checkpoint,
    compile_workflow_source,
    restore,
    step,
)
from workflows._context import StepContext
from workflows._step import Suspended


def _compile(src: str, name: str, **extra):
    g = {n: getattr(workflows, n) for n in workflows.__all__}
    g.update(extra)
    return compile_workflow_source(textwrap.dedent(src), f"{name}.py", name, g)


def _suspend(wf, *args):
    cont = wf.start(*args)
    with StepContext().active():
        r = step(cont)
    assert isinstance(r, Suspended)
    return cont


def _send(cont, value=None):
    with StepContext().active():
        return step(cont, value)


def test_an_object_put_into_module_data_after_a_checkpoint_is_found_at_the_next():
    """The walk of module data is reused only while the data is as it found it: an object the
    workflow put into a module list after the first checkpoint is the module's at the second."""
    wf = _compile(
        """
        REG = {"items": []}

        async def registers(x):
            mine = {"n": x}
            await timer("t", 1)
            REG["items"].append(mine)
            await timer("t", 1)
            mine["n"] += 1
            return REG["items"][0]["n"]
        """,
        "registers",
    )
    g = wf.__wrapped__.__globals__
    cont = restore(checkpoint(_suspend(wf, 3)))
    assert not g["REG"]["items"]
    _send(cont)
    back = restore(checkpoint(cont))
    assert back._frames[0].__dict__["v_mine"] is g["REG"]["items"][0]
    assert _send(back).value == 4


@pytest.mark.parametrize(
    "change",
    [
        "REG['items'] = [{'n': 0}]",  # an item replaced by another of its type
        "Holder.rows = [{'n': 0}]",  # a class attribute rebound
        "REG.clear(); REG['items'] = [{'n': 0}]",  # emptied and filled again
    ],
)
def test_a_changed_module_makes_the_walk_anew(change):
    """After module data changed, a local holding the object now at the old path is kept by
    reference to it (the walk is made again, not reused)."""
    wf = _compile(
        """
        REG = {"items": [{"n": 0}]}

        class Holder:
            rows = [{"n": 0}]

        async def holds(which):
            seen = [which]  # a container: the first checkpoint walks module data
            await timer("t", 1)
            got = REG["items"][0] if which == "reg" else Holder.rows[0]
            await timer("t", 1)
            return got, seen
        """,
        "holds",
    )
    g = wf.__wrapped__.__globals__
    for which in ("reg", "holder"):
        cont = _suspend(wf, which)
        checkpoint(cont)  # a walk of the data as it is now
        exec(change, g)
        _send(cont)
        back = restore(checkpoint(cont))
        want = g["REG"]["items"][0] if which == "reg" else g["Holder"].rows[0]
        assert back._frames[0].__dict__["v_got"] is want


@pytest.mark.parametrize(
    "change",
    [
        "PLAYER.spare = Pet(2)",  # an attribute rebound
        "PLAYER.__dict__ = {'pet': PLAYER.pet, 'spare': Pet(2)}",  # its __dict__ replaced
        "del PLAYER.spare; PLAYER.extra = Pet(2)",  # one removed, another added
    ],
)
def test_a_changed_instance_of_module_data_makes_the_walk_anew(change):
    """An instance of module data is checked by its attributes (its __dict__'s keys and values):
    once one is rebound, added or removed, or its __dict__ replaced, a local holding an object
    put there since is kept by reference to it, not copied."""
    wf = _compile(
        """
        class Pet:
            def __init__(self, n):
                self.n = n

        class Player:
            def __init__(self):
                self.pet = Pet(1)
                self.spare = Pet(0)

        PLAYER = Player()

        async def holds():
            first = PLAYER.pet
            await timer("t", 1)
            got = getattr(PLAYER, "extra", None) or PLAYER.spare
            await timer("t", 1)
            return first.n, got.n
        """,
        "holds",
    )
    g = wf.__wrapped__.__globals__
    cont = _suspend(wf)
    checkpoint(cont)  # (pickle caches __slotnames__ on Pet: a change, walked again next)
    checkpoint(cont)  # a walk of the data as it is now
    exec(change, {"PLAYER": g["PLAYER"], "Pet": g["Pet"]})  # (no global of the module changes)
    _send(cont)
    back = restore(checkpoint(cont))
    player = g["PLAYER"]
    assert back._frames[0].__dict__["v_got"] is (getattr(player, "extra", None) or player.spare)
    assert back._frames[0].__dict__["v_first"] is player.pet


def test_a_set_of_objects_hashed_by_identity_is_refused_naming_it_not_its_neighbours():
    """The set is named (not a local that only reaches it, nor one listed before it), with the
    fix; a dict keyed by the same objects restores."""
    wf = _compile(
        """
        class Node:
            pass

        async def nodes(x):
            a, b = Node(), Node()
            first = [1, 2]
            index = {a: 1, b: 2}
            both = {a, b}
            holder = [both]
            await timer("t", 1)
            return len(both), len(holder), first, index[a]
        """,
        "nodes",
    )
    with pytest.raises(CheckpointError) as info:
        checkpoint(_suspend(wf, 1))
    assert info.value.variable == "both"
    assert "hashes by its identity" in str(info.value) and "__hash__" in str(info.value)


def test_a_set_subclass_is_refused_where_its_table_cannot_be_read(monkeypatch):
    """Where the set table layout is not one the checkpoint knows (another interpreter), a set
    subclass whose order a plain rebuild would change is refused, naming it."""
    wf = _compile(
        """
        class Tags(set):
            pass

        async def tags(x):
            t = Tags(range(0, 300, 7))
            t.difference_update(range(0, 300, 21))
            await timer("t", 1)
            return list(t)
        """,
        "tags",
    )
    cont = _suspend(wf, 1)
    assert restore(checkpoint(cont))._frames[0].__dict__["v_t"] == cont._frames[0].__dict__["v_t"]
    monkeypatch.setattr(_settable, "SUPPORTED", False)
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    assert info.value.variable == "t" and "sorted(" in str(info.value)


def test_a_view_of_part_of_a_buffer_and_a_whole_one_follow_it(monkeypatch):
    """Both come back as views of the restored bytearray, the part at its place in it; where
    the view's layout is not one the checkpoint knows (another interpreter), the part is
    refused, naming it."""
    wf = _compile(
        """
        async def views(x):
            buf = bytearray(b"abcd")
            whole = memoryview(buf).cast("B", (4,))
            await timer("t", 1)
            buf[0] = 122
            part = memoryview(buf)[1:]
            await timer("t", 1)
            return bytes(whole), bytes(part)
        """,
        "views",
    )
    cont = restore(checkpoint(_suspend(wf, 1)))
    _send(cont)
    assert bytes(cont._frames[0].__dict__["v_whole"]) == b"zbcd"
    again = restore(checkpoint(cont))
    f = again._frames[0].__dict__
    f["v_part"][0] = ord("Y")
    assert f["v_part"].obj is f["v_buf"] and bytes(f["v_buf"]) == b"zYcd" and bytes(f["v_whole"]) == b"zYcd"
    monkeypatch.setattr(_memview, "SUPPORTED", False)
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    assert info.value.variable == "part" and "slice bounds" in str(info.value)


def test_the_module_walk_budget_still_refuses_naming_the_variable(monkeypatch):
    """A walk stopped at its budget refuses (names the variable) rather than copying an object
    something else holds too (here the test: it may as well be module data the walk missed)."""
    wf = _compile(
        """
        BIG = [[i] for i in range(50)]

        async def big(x):
            mine = [x]
            await timer("t", 1)
            return mine
        """,
        "big",
    )
    cont = _suspend(wf, 1)
    checkpoint(cont)
    held = [f.__dict__["v_mine"] for f in cont._frames if "v_mine" in f.__dict__]
    assert held == [[1]]
    monkeypatch.setattr(_pickle_modules, "_PATH_BUDGET", 10)
    with pytest.raises(CheckpointError) as info:
        checkpoint(cont)
    assert info.value.variable == "mine" and "more than 10 objects" in str(info.value)


def test_a_list_only_the_workflow_holds_is_written_though_the_module_walk_stopped(monkeypatch):
    """Held by nothing but the workflow's locals, a list is no module data, whatever the walk
    of module data reached: written, not refused (it was: "more than 10 objects")."""
    wf = _compile(
        """
        BIG = [[i] for i in range(50)]

        async def big(x):
            mine = [x, {"k": [x]}]
            await timer("t", 1)
            return mine
        """,
        "big",
    )
    cont = _suspend(wf, 1)
    monkeypatch.setattr(_pickle_modules, "_PATH_BUDGET", 10)
    assert _send(restore(checkpoint(cont))).value == [1, {"k": [1]}]


def test_a_restore_that_fails_names_the_variable_holding_an_instance_dict_that_reaches_it():
    """The restore's error names the variable through which the value is reached, also where it
    holds only an instance's ``__dict__`` (on 3.13 the instance keeps the values inline, and
    ``gc.get_referents`` of that dict sees none of them)."""
    from workflows._compiler._checkpoint import _not_restorable

    wf = _compile(
        """
        class Box:
            pass

        KEPT = []

        async def holds_vars(x):
            box = Box()
            box.tags = {x}
            sheet = vars(box)
            KEPT.append(box)
            del box
            other = [x]
            await timer("t", 1)
            return sheet, other
        """,
        "holds_vars",
    )
    cont = _suspend(wf, 1)
    tags = cont._frames[0].__dict__["v_sheet"]["tags"]
    err = _not_restorable("holds_vars", cont._frames, tags, "a set", "a reason")
    assert err.variable == "sheet", str(err)
    wf.__wrapped__.__globals__["KEPT"].clear()
