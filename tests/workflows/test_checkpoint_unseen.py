"""The rules behind the fixes that corpus_unseen's programs needed, each checked on its own:
an instance's ``__dict__`` held apart comes back as the instance's; a compiled pattern comes back
as ``re.compile``'s cached object; a class the workflow made is not made a second time (with its
``__init_subclass__``) by a restore in the process that has it, and is made once in one that
does not.
"""

from __future__ import annotations

import collections
import fractions
import pickle
import re
import types

import cloudpickle  # type: ignore[import-untyped]

from workflows._compiler import (
    _dynclass,
    _pickler,
    checkpoint,
    restore,
)

from .test_checkpoint_contract import _compile, _send, _suspend  # noqa: E402


class Sheet:
    def __init__(self, **stats):
        vars(self).update(stats)


class OwnState:
    def __init__(self):
        self.cache = {"k": 1}

    def __getstate__(self):
        return {"cache": dict(self.cache)}


def _roundtrip(obj):
    return _pickler.loads(_pickler.dumps(obj, {}))


def test_a_held_instance_dict_is_the_instance_dict_after_a_restore():
    """vars(obj) held next to obj, in either order and with obj inside its own dict, comes back
    as obj's __dict__."""
    s = Sheet(hp=3)
    s.me = s
    for held in ([vars(s), s], [s, vars(s)]):
        d, obj = _roundtrip(held) if held[1] is s else _roundtrip(held)[::-1]
        assert d is vars(obj)
        assert obj.me is obj and obj.hp == 3
        d["hp"] = 9
        assert obj.hp == 9
    fresh = Sheet(hp=1)
    state = {"hero": fresh, "sheet": vars(fresh)}
    del fresh
    back = _roundtrip(state)  # the dict held once besides its instance
    assert back["sheet"] is vars(back["hero"])


def test_an_unshared_instance_dict_is_written_as_pickle_writes_it():
    """An instance whose __dict__ nothing else holds pickles exactly as pickle writes it."""
    s = Sheet(hp=3)
    assert _pickler.dumps([s], {}) == cloudpickle.dumps([s], protocol=pickle.HIGHEST_PROTOCOL)


def test_a_held_dict_the_state_cannot_give_back_is_the_instance_dict_again():
    """vars(obj) held apart from obj, where obj's state cannot be that dict (a class whose own
    __getstate__ decides its state; a SimpleNamespace, whose dict cannot be assigned), comes
    back as the restored instance's own dict, holding what it held, in either order and with
    the instance and the dict inside it."""
    for make in (OwnState, lambda: types.SimpleNamespace(hp=3, bag=["rope"])):
        for first in (True, False):
            o = make()
            d = vars(o)
            d["owner"], d["me"] = o, d
            rd, ro = _roundtrip([d, o]) if first else _roundtrip([o, d])[::-1]
            assert rd is vars(ro) and rd["me"] is rd and rd["owner"] is ro
            assert sorted(rd) == sorted(d) and type(ro) is type(o)


def test_a_compiled_pattern_is_the_re_module_cached_object_again():
    """Patterns compiled with no flags, with flags, and with inline flags come back as what
    re.compile returns for them."""
    for source, flags in (
        ("a+b", 0),
        ("x\\d", re.IGNORECASE),
        ("(?i)warp (\\d+)", 0),
        (b"\\x00+", 0),
    ):
        p = re.compile(source, flags)
        assert _roundtrip(p) is p
        assert _roundtrip(p) is re.compile(source, flags)


PLUGINS = _compile(
    """
    class Plugin:
        made = []

        def __init_subclass__(cls, **kw):
            super().__init_subclass__(**kw)
            Plugin.made.append(cls.__name__)

    async def registers(x):
        class Fire(Plugin):
            power = x

        await timer("t", 1)
        return Fire.power, Plugin.made.count("Fire")
    """,
    "plugins",
)


def test_a_restore_does_not_run_the_class_hooks_of_a_class_the_process_has():
    """Restored in the process that made it, the workflow's class is itself, its
    __init_subclass__ has run once; made anew (as in another process), it runs once there."""
    g = PLUGINS.__wrapped__.__globals__
    del g["Plugin"].made[:]
    cont = _suspend(PLUGINS, 5)
    blob = checkpoint(cont)
    assert g["Plugin"].made == ["Fire"]
    back = restore(blob)
    assert g["Plugin"].made == ["Fire"]
    assert _send(back).value == (5, 1)
    assert _dynclass.TRACKER is not None  # cloudpickle still tracks its classes by id
    del cont, back
    fire = [k for k in list(_dynclass.TRACKER.values()) if getattr(k, "__name__", "") == "Fire"]
    for k in fire:  # as in a process that never had the class
        for tid, v in list(_dynclass.TRACKER.items()):
            if v is k:
                del _dynclass.TRACKER[tid]
    del g["Plugin"].made[:]
    again = restore(blob)
    assert g["Plugin"].made == ["Fire"]
    assert _send(again).value == (5, 1)


SLOTTED = _compile(
    """
    async def slotted(x):
        class Mob:
            __slots__ = ("hp",)

            def __init__(self, hp):
                self.hp = hp

        m = Mob(x)
        await timer("t", 1)
        try:
            m.undeclared = 1
        except AttributeError:
            return m.hp, "refused"
        return m.hp, "accepted"
    """,
    "slotted",
)


def _forget_classes(name):
    """Drop the classes called ``name`` from cloudpickle's tracker, as in a new process."""
    for tid, k in list(_dynclass.TRACKER.items()):
        if getattr(k, "__name__", "") == name:
            del _dynclass.TRACKER[tid]


def test_a_class_made_anew_by_a_restore_keeps_its_slots():
    """A workflow class with __slots__, made anew by a restore (as in another process), still
    has them: its instances have no __dict__ and refuse an undeclared attribute."""
    blob = checkpoint(_suspend(SLOTTED, 4))
    _forget_classes("Mob")
    back = restore(blob)
    m = back._frames[0].__dict__["v_m"]
    assert not hasattr(m, "__dict__")
    assert _send(back).value == (4, "refused")


class Bag(collections.Counter):
    pass


class Teams(collections.defaultdict):
    pass


class Price(fractions.Fraction):
    pass


def test_attributes_of_standard_container_subclasses_survive():
    """Counter, defaultdict and Fraction subclasses keep the attributes set on their instances
    (their base's reduce leaves them out), and a held vars() of one is its __dict__."""
    b = Bag(gold=2)
    b.owner = "ann"
    t = Teams(list)
    t["red"].append(1)
    t.season = 3
    p = Price(1, 3)
    p.currency = "gold"
    rb, rt, rp, rd = _roundtrip([b, t, p, vars(b)])
    assert (dict(rb), rb.owner) == ({"gold": 2}, "ann")
    assert (dict(rt), rt.season, rt.default_factory) == ({"red": [1]}, 3, list)
    assert (rp, rp.currency) == (fractions.Fraction(1, 3), "gold")
    assert rd is vars(rb)


class OwnedBag(collections.Counter):
    def __init__(self, owner, *args, **kw):
        super().__init__(*args, **kw)
        self.owner = owner


class OwnedLog(collections.OrderedDict):
    def __init__(self, owner):
        super().__init__()
        self.owner = owner


def test_a_subclass_with_its_own_init_is_rebuilt_as_its_base_builds_it():
    """A Counter or OrderedDict subclass whose __init__ takes other arguments than its base's
    comes back with its items and attributes (pickle would pass the items to that __init__: the
    bag's owner became its counts, the log failed to rebuild)."""
    b = OwnedBag("ann", gold=2)
    lg = OwnedLog("bob")
    lg["x"] = 1
    rb, rl = _roundtrip([b, lg])
    assert (dict(rb), rb.owner, type(rb)) == ({"gold": 2}, "ann", OwnedBag)
    assert (list(rl.items()), rl.owner) == ([("x", 1)], "bob")
