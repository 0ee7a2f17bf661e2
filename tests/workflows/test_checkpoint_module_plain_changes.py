"""Module data whose plain values change between checkpoints is not walked again, and objects
that move in it still are.

A checkpoint finds the objects of module data a workflow holds by a walk of module data, kept
while module data is as the walk found it. A game changes plain values there all the time (a
hero's hit points, a counter, a log of tuples): those leave every object where the walk found
it, so the walk stands (a walk of 10,000 players costs ~100 ms; the check of what changed, a
few). An object that gains or loses a place (put into a list, moved by an insert, replaced) is
walked again, so a local holding it is still that very object after a restore.
"""

from __future__ import annotations

import pickle
from collections import defaultdict

import pytest
from hypothesis import HealthCheck, given, note, settings
from hypothesis import strategies as st

from workflows import signal, workflow
from workflows._compiler import _pickle_modules, checkpoint, restore, step
from workflows._context import StepContext
from workflows._step import Finished, Suspended

from .diffharness import resume_in_a_new_interpreter


class Hero:
    def __init__(self, name: str) -> None:
        self.name = name
        self.hp = 10


HEROES = [Hero("ann"), Hero("bob"), Hero("cid")]
KILLS = {"ann": 0, "bob": 0}
LOG: list[tuple[str, int]] = []
_IMPORTED = list(HEROES)
# The first pickle of a Hero caches its ``__slotnames__`` on the class (an attribute more, a
# list: a change the walk cannot pass over): made here, so that the counts below are the
# workflow's.
pickle.dumps(Hero("warm"))


@pytest.fixture(autouse=True)
def _module_data_as_imported():
    yield
    HEROES[:] = _IMPORTED
    for h in HEROES:
        h.hp = 10
    KILLS.update(ann=0, bob=0)
    KILLS.pop("cid", None)
    LOG.clear()


@pytest.fixture
def walks(monkeypatch):
    """How many times module data is walked."""
    count = [0]
    walk = _pickle_modules.ModuleData._walk

    def counted(self):
        count[0] += 1
        return walk(self)

    monkeypatch.setattr(_pickle_modules.ModuleData, "_walk", counted)
    return count


@workflow
async def fights(rounds: int, move: str = "") -> tuple:
    hero = HEROES[1]
    extra = None
    for n in range(rounds):
        await signal("round")
        hero.hp -= 1  # an instance's plain attribute
        KILLS["bob"] += 1  # a dict's plain value
        LOG.append(("hit", n))  # a list grows by plain values
        if n == 0:
            KILLS["cid"] = 0  # a dict grows by a plain key and value
        if n == 1 and move == "insert":
            HEROES.insert(0, Hero("dan"))  # every hero moves one place on
        if n == 1 and move == "object":
            extra = Hero("eve")
            LOG.append(extra)  # an object gains a place in module data, and a local holds it
    return (
        hero.name, hero.hp, any(h is hero for h in HEROES), KILLS["bob"], len(LOG),
        extra is None or extra is LOG[2],
    )


def _run(rounds: int, move: str = "") -> tuple:
    """Run ``fights`` with a restore of its checkpoint at every await, in this process."""
    with StepContext().active():
        cont = fights.start(rounds, move)
        r = step(cont)
        while isinstance(r, Suspended):
            cont = restore(checkpoint(cont))
            r = step(cont, None)
        assert isinstance(r, Finished)
        return r.value


def test_plain_changes_keep_the_walk(walks):
    assert _run(6) == ("bob", 4, True, 6, 6, True)
    assert walks[0] == 1


def test_an_object_moved_by_an_insert_is_walked_again_and_stays_itself(walks):
    assert _run(4, "insert") == ("bob", 6, True, 4, 4, True)
    assert walks[0] == 2


def test_an_object_put_into_module_data_is_walked_again(walks):
    # (written by value, not by its path, ``extra`` would come back a copy, not LOG's object)
    assert _run(4, "object") == ("bob", 6, True, 4, 5, True)
    assert walks[0] == 2


def test_a_checkpoint_after_plain_changes_restores_in_a_new_process():
    with StepContext().active():
        cont = fights.start(5)
        step(cont)
        for _ in range(3):
            checkpoint(cont)
            step(cont, None)
        blob = checkpoint(cont)
    # The new process imports this module (its data as imported) and finds the hero by its path.
    got = resume_in_a_new_interpreter(
        blob, module=__name__, workflow_type=fights.__workflow_key__, steps=None, answer="value"
    )
    assert got == ("bob", 8, True, 2, 2, True)


# The walk kept across changes is the walk made again: whatever module data went through, the
# paths a checkpoint finds its objects by are those a new walk finds.


class Thing:
    def __init__(self, n: int) -> None:
        self.n = n


_SPACE: dict = {"__name__": __name__}


def _fresh_space() -> None:
    _SPACE.clear()
    _SPACE.update(
        __name__=__name__,
        ROOM=[Thing(0), 1, "a", Thing(1)],
        TABLE={"a": Thing(2), "b": 2, 3: ("x", 1)},
        HERO=Thing(3),
        LOG=[],
    )
    _SPACE["HERO"].pet = Thing(4)


def _kept_paths() -> dict:
    data = _pickle_modules.ModuleData({id(_SPACE): ("k", _SPACE)})
    return dict(data.paths())


def _walked_paths() -> dict:
    data = _pickle_modules.ModuleData({id(_SPACE): ("k", _SPACE)})
    data._index()
    return dict(data._walk().index)


_VALUES = st.one_of(
    st.integers(-5, 5), st.text(max_size=2), st.none(),
    st.tuples(st.integers(0, 3), st.text(max_size=1)),
    st.just("new object"), st.just("an object already there"),
)
_CHANGES = st.tuples(
    st.sampled_from(["ROOM", "LOG", "TABLE", "HERO"]),
    st.sampled_from(["set", "add", "insert", "remove", "rename"]),
    st.integers(0, 6),
    _VALUES,
)


def _value(v: object, n: int) -> object:
    if v == "new object":
        return Thing(100 + n)
    if v == "an object already there":
        things = [o for o in _pickle_modules.contents(_SPACE["ROOM"], ()) if isinstance(o, Thing)]
        return things[n % len(things)] if things else Thing(200 + n)
    return v


def _change(where: str, how: str, k: int, v: object, n: int) -> None:
    o = _SPACE[where]
    value = _value(v, n)
    if isinstance(o, list):
        if how == "set" and o:
            o[k % len(o)] = value
        elif how == "insert":
            o.insert(k, value)
        elif how == "remove" and o:
            del o[k % len(o)]
        else:
            o.append(value)
    elif isinstance(o, dict):
        keys = list(o)
        if how == "set" and keys:
            o[keys[k % len(keys)]] = value
        elif how == "rename" and keys:  # its value found by another key, at the same place
            o[f"r{k}"] = o.pop(keys[k % len(keys)])
        elif how == "remove" and keys:
            del o[keys[k % len(keys)]]
        else:
            o[f"k{k}"] = value
    else:
        names = ["hp", "pet", "n", "mood"]
        if how == "remove":
            vars(o).pop(names[k % 4], None)
        elif how == "rename" and hasattr(o, names[k % 4]):
            setattr(o, names[(k + 1) % 4], vars(o).pop(names[k % 4]))
        else:
            setattr(o, names[k % 4], value)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.lists(_CHANGES, min_size=1, max_size=3), max_size=8))
def test_the_walk_kept_across_changes_is_the_walk_made_again(steps):
    """Module data changed by a few changes between two checkpoints, over several."""
    _fresh_space()
    assert _kept_paths() == _walked_paths()
    n = 0
    for changes in steps:
        for where, how, k, v in changes:
            n += 1
            _change(where, how, k, v, n)
            note(f"{where} {how} {k} {v!r}")
        assert _kept_paths() == _walked_paths()


def test_an_object_under_a_renamed_key_is_walked_again():
    """A plain key replaced at its place (``del d["a"]; d["b"] = x``, the dict's size and order
    kept) is a change of the path of its value."""
    _fresh_space()
    thing = Thing(9)
    _SPACE["ONE"] = one = {"a": thing}
    assert _kept_paths()[id(thing)] == _walked_paths()[id(thing)]
    del one["a"]
    one["renamed"] = thing  # the same place, under another key
    assert _kept_paths()[id(thing)] == _walked_paths()[id(thing)]
    assert "renamed" in repr(_kept_paths()[id(thing)])


class Slotted:
    __slots__ = ("a", "b", "__secret")


def _rename_slot(o: Slotted, thing: Thing) -> None:
    del o.a
    o.b = thing


def _rename_key(o: defaultdict, thing: Thing) -> None:
    del o["a"]
    o["b"] = thing


@pytest.mark.parametrize(
    ("make", "rename"),
    [(Slotted, _rename_slot), (lambda: defaultdict(list), _rename_key)],
    ids=["slot", "defaultdict-key"],
)
def test_an_object_under_another_name_at_its_place_is_walked_again(make, rename):
    """A slotted object, a dict subclass: the object found at the same place under another slot
    or key (``del o.a; o.b = x``) is found by that other one."""
    _fresh_space()
    thing = Thing(9)
    holder = make()
    if isinstance(holder, Slotted):
        holder.a = thing
    else:
        holder["a"] = thing
    _SPACE["HOLDER"] = holder
    assert "'a'" in repr(_kept_paths()[id(thing)])
    rename(holder, thing)
    assert _kept_paths()[id(thing)] == _walked_paths()[id(thing)]
    assert "'b'" in repr(_kept_paths()[id(thing)])


def test_a_slotted_object_unchanged_keeps_the_walk(walks):
    """Its slot names, a private one's mangled name too, are the same names at each check."""
    _fresh_space()
    holder = Slotted()
    holder.a, holder._Slotted__secret = Thing(1), Thing(2)
    _SPACE["HOLDER"] = holder
    _kept_paths()
    _kept_paths()
    assert walks[0] == 1


def test_a_deeply_nested_tuple_put_into_module_data_is_walked_not_recursed_into(walks):
    """A chain of 2,000 nested tuples (deeper than the interpreter's recursion limit) appended
    to a module list: walked again (an object may be at its end), with no recursion error."""
    _fresh_space()
    _kept_paths()
    chain: tuple = ()
    for n in range(2_000):
        chain = (n, chain)
    _SPACE["LOG"].append(chain)
    assert _kept_paths() == _walked_paths()
    assert walks[0] == 3  # the first, the check's walk again, and the one to compare with
