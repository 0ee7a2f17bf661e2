"""A set held across an await whose elements hash by an object's identity.

A set iterates in the order of its elements' hashes. An element whose hash is made from the
address of an object (its own: an iterator, a function, an instance without ``__hash__``, a
NaN; the object a method is bound to; such an object in a tuple, a frozenset or an Event) hashes
as it did only where that object comes back as itself. Where the checkpoint copies it, the copy
hashes otherwise and the set cannot come back in its order: the checkpoint refuses the set (or
frozenset), wherever it is held (in a local, a list, a dict, an instance, a set subclass, a
loop), naming the variable, its type and the await, and saying what to write instead; it is
never accepted and then refused at the restore, nor given back in another order. Where the
object comes back as itself (a module's function or class, a method of a module-level list,
``None``), the set comes back exactly in this process, and in another one (where such objects
are at other addresses) with the same elements in that process's own order.
"""

from __future__ import annotations

import textwrap

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import workflows
from workflows import CheckpointError
from workflows._compiler import _settable, checkpoint, compile_workflow_source, restore, step
from workflows._compiler._pickle_sets import BY_VALUE, hash_identities, hashed_by_value
from workflows._context import StepContext
from workflows._step import Suspended

from .diffharness import resume_in_a_new_interpreter

_MODULE = """
class Box:
    def __init__(self, items):
        self.items = items


class Tags(set):
    pass


class Frozen(frozenset):
    pass


class Key:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return isinstance(other, Key) and other.n == self.n

    def __hash__(self):
        return hash(self.n)

    def get(self):
        return self.n


def fa():
    return 1


def fb():
    return 2


class Ka:
    pass


class Kb:
    pass


class Priv:
    __slots__ = ("__k",)

    def __init__(self, k):
        self.__k = k

    def __eq__(self, other):
        return isinstance(other, Priv) and other._Priv__k is self.__k

    def __hash__(self):
        return hash(self.__k)


class ById:
    def __init__(self, n):
        self.n = n

    def __eq__(self, other):
        return other is self

    def __hash__(self):
        return id(self) >> 4


MARKS = [object() for _ in range(6)]
REG = []
"""


def _compile(body: str, name: str = "w"):
    """A workflow that runs ``body`` (setting ``held``), awaits, and returns ``held``."""
    src = (
        _MODULE
        + f"\n\nasync def {name}():\n"
        + textwrap.indent(textwrap.dedent(body), "    ")
        + '    await signal("go")\n    return held\n'
    )
    g = {n: getattr(workflows, n) for n in workflows.__all__}
    return compile_workflow_source(src, f"{name}.py", name, g)


def _suspend(wf, *args):
    cont = wf.start(*args)
    with StepContext().active():
        r = step(cont)
    assert isinstance(r, Suspended)
    return cont


def _refused_or_restored_in_order(cont, variable: str) -> CheckpointError | None:
    """The CheckpointError of ``checkpoint(cont)``, or None where it was accepted and the
    restore gives ``variable`` back with its sets in their order; fails where the restore
    refuses what the checkpoint accepted, or gives a set back in another order."""
    try:
        blob = checkpoint(cont)
    except CheckpointError as e:
        return e
    try:
        back = restore(blob)
    except CheckpointError as e:
        pytest.fail(f"checkpoint() accepted {variable!r}, restore() refused it: {e}")
    before = _orders(cont._frames[0].__dict__[f"v_{variable}"])
    after = _orders(back._frames[0].__dict__[f"v_{variable}"])
    assert after == before, f"{variable!r} came back in another order, or another table"
    return None


def _orders(v):
    """The order of every set ``v`` holds (through lists, dicts and instances), each element
    told apart by what survives a copy (a range iterator by its range and position), and the
    table of each set."""
    out = []
    stack = [v]
    while stack:
        o = stack.pop()
        if isinstance(o, (set, frozenset)):
            out.append([_key(x) for x in o])
            if isinstance(o, set):
                out.append(_settable.read(o))
        elif isinstance(o, (list, tuple)):
            stack.extend(o)
        elif isinstance(o, dict):
            stack.extend(o.values())
        elif hasattr(o, "__dict__") and not callable(o):
            stack.extend(vars(o).values())
    return out


def _key(x):
    if type(x).__name__.endswith("range_iterator"):
        return ("range_iterator", x.__reduce__()[1:])
    if isinstance(x, tuple):
        return tuple(map(_key, x))
    return getattr(x, "__qualname__", None) or x


# ---------------------------------------------------------------------------------------------
# Refused at the checkpoint


def test_a_set_of_range_iterators_is_refused_at_the_checkpoint_not_at_the_restore():
    """The same four iterators (the set's table with a dummy slot, recorded as it is): the
    copies hash otherwise, so no restore could rebuild that table."""
    wf = _compile(
        """
        held = set(iter(range(3)) for _ in range(4))
        held.add(0)
        held.discard(0)
        """
    )
    e = _refused_or_restored_in_order(_suspend(wf), "held")
    assert e is not None, "checkpoint() accepted a set of range iterators"
    assert e.variable == "held" and e.value_type == "set", str(e)
    assert "w.py" in e.location and "signal('go')" in e.location, e.location
    assert "range_iterator" in str(e) and "hashes by its identity" in str(e), str(e)
    assert "hold a list" in str(e), str(e)


# body, the type of the variable held, words of the refusal (what the element is)
REFUSED = {
    "range iterators (as written)": (
        "held = set(iter(range(3)) for _ in range(4))", "set", "range_iterator",
    ),
    "iterators over big ranges": (
        "held = {iter(range(1 << 64)), iter(range(1 << 65))}", "set", "iterator",
    ),
    "one range iterator": ("held = {iter(range(3))}", "set", "range_iterator"),
    "list iterators": ("held = {iter([1, 2]), iter([3])}", "set", "list_iterator"),
    "enumerate, zip and map": (
        "held = {enumerate([1]), zip([1], [2]), map(abs, [1])}", "set", "iterator",
    ),
    "methods bound to lists": ("held = {[].append, [].append, [1].pop}", "set", "bound to a list"),
    "methods bound to instances hashed by value": (
        "held = {Key(1).get, Key(2).get}", "set", "bound to",
    ),
    "tuples holding range iterators": (
        "held = {(1, iter(range(3))), (2, iter(range(3)))}", "set", "tuple holding",
    ),
    "frozensets holding range iterators": (
        "held = {frozenset([iter(range(3))]), frozenset([1, iter(range(2))])}", "set",
        "frozenset holding",
    ),
    "Events holding range iterators": (
        "held = {Event('a', iter(range(3))), Event('b', iter(range(3)))}", "set", "Event holding",
    ),
    "NaNs": ("held = {float('nan'), 1.5, complex('nan+1j')}", "set", "NaN"),
    "a NaN in a tuple": ("held = {(1, float('nan')), (2, 0.5)}", "set", "tuple holding a NaN"),
    "a frozenset of range iterators": (
        "held = frozenset([iter(range(3)), iter(range(4))])", "frozenset", "range_iterator",
    ),
    "a set in a list": ("held = [1, {iter(range(3)), iter(range(3))}]", "list", "range_iterator"),
    "a set in a dict": ("held = {'s': {iter(range(3)), iter(range(3))}}", "dict", "range_iterator"),
    "a set held by an instance": (
        "held = Box({iter(range(3)), iter(range(3))})", "Box", "range_iterator",
    ),
    "a set subclass": ("held = Tags([iter(range(3)), iter(range(3))])", "Tags", "range_iterator"),
    "a frozenset subclass": (
        "held = Frozen([iter(range(3)), iter(range(4))])", "Frozen", "range_iterator",
    ),
    "instances without __hash__": ("held = {Ka(), Kb()}", "set", "__hash__"),
    "functions made in the workflow": (
        "held = {lambda: 1, lambda: 2}", "set", "function made in the workflow",
    ),
    "a class's own __hash__ over instances without one": (
        "held = {Key(Ka()), Key(Kb()), Key(Ka())}", "set", "Key whose own __hash__ reads a field holding",
    ),
    "a class's own __hash__ over a private slot": (
        "held = {Priv(Ka()) for _ in range(40)}", "set", "Priv whose own __hash__ reads a field holding",
    ),
    "instances whose own __hash__ is made from their id": (
        "held = {ById(n) for n in range(6)}", "set", "ById whose own __hash__ is made from its identity",
    ),
    "a frozenset of such instances": (
        "held = frozenset(ById(n) for n in range(3))", "frozenset", "whose own __hash__ is made from",
    ),
    "a tuple holding such an instance": (
        "held = {(1, ById(1)), (2, ById(2))}", "set", "ById whose own __hash__ is made from its identity",
    ),
    "set iterator": (
        "held = iter({iter(range(3)), iter(range(3))})", "set_iterator", "range_iterator",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_set_whose_elements_hash_by_a_copied_identity_is_refused_naming_the_variable(case):
    body, tname, words = REFUSED[case]
    wf = _compile(body + "\n")
    e = _refused_or_restored_in_order(_suspend(wf), "held")
    assert e is not None, f"checkpoint() accepted {case}"
    assert e.variable == "held", str(e)
    assert e.value_type is not None and e.value_type.endswith(tname), (e.value_type, str(e))
    assert "signal('go')" in e.location, e.location
    assert words in str(e) and "cannot come back in its order" in str(e), str(e)
    assert "across the await" in str(e), str(e)


def test_a_loop_over_such_a_set_is_refused_at_its_await():
    """A for loop over a set of range iterators suspended mid-way: the set and the loop's
    iterator are refused, naming the set."""
    wf = compile_workflow_source(
        textwrap.dedent(
            """
            async def w():
                its = {iter(range(3)), iter(range(4)), iter(range(5))}
                seen = 0
                for it in its:
                    seen += next(it)
                    await signal("go")
                return seen
            """
        ),
        "loop.py",
        "w",
        {n: getattr(workflows, n) for n in workflows.__all__},
    )
    with pytest.raises(CheckpointError) as info:
        checkpoint(_suspend(wf))
    assert info.value.variable == "its" and "range_iterator" in str(info.value), str(info.value)


def test_a_frozenset_subclass_whose_rebuilt_table_would_differ_is_refused_as_a_frozenset():
    """A frozenset subclass is rebuilt from its elements in their order, as a frozenset is: where
    that lays them out otherwise (hashes that collide, added in the order of another set), it is
    refused naming the variable, not given back in another order."""
    wf = _compile("held = Frozen({Key(i * 8) for i in range(40)})\n")
    e = _refused_or_restored_in_order(_suspend(wf), "held")
    assert e is not None, "checkpoint() accepted a frozenset subclass it gives back reordered"
    assert e.variable == "held" and e.value_type.endswith("Frozen"), str(e)
    assert "iteration order a restore cannot reproduce" in str(e), str(e)


_SCALAR = st.one_of(
    st.integers(-3, 3),
    st.sampled_from(["nan", "0.5", "-0.0", "inf"]).map(float),  # a new NaN each time
    st.sampled_from(["nan+1j", "1-2j"]).map(complex),
    st.text("ab", max_size=2),
    st.none(),
    st.just(range(2)),
)
_ELEMENT = st.one_of(_SCALAR, st.tuples(_SCALAR), st.tuples(_SCALAR, st.tuples(_SCALAR)))


@settings(max_examples=300, derandomize=True, database=None)
@given(st.lists(_ELEMENT, max_size=6))
def test_the_check_at_c_speed_agrees_with_the_walk_of_each_element(elements):
    """hashed_by_value (types and NaNs at C speed, one level of tuples) says a set needs no
    look into its elements exactly where hash_identities finds no address in any of them (but
    for None, which is itself)."""
    s = set(elements)
    by_value = not any(obj is not None for e in s for _part, obj in hash_identities(e))
    if hashed_by_value(s, BY_VALUE | {type(None)}):
        assert by_value
    elif not _nested(s):  # a tuple in a tuple is left to the walk
        assert not by_value


def _nested(s) -> bool:
    """Whether ``s`` holds a tuple in a tuple."""
    return any(type(x) is tuple and any(type(y) is tuple for y in x) for x in s)


# ---------------------------------------------------------------------------------------------
# Accepted: the objects come back as themselves


ACCEPTED = {
    "the module's functions and classes": "held = {fa, fb, Ka, Kb, Box}",
    "with dummy slots": "held = {fa, fb, Ka, Kb, *MARKS}\nheld.discard(fb)\nheld.discard(MARKS[0])",
    "the module's objects": "held = set(MARKS)\nheld.add(0)\nheld.discard(0)",
    "None, Ellipsis and builtins": (
        "held = {None, ..., len, abs, dict.fromkeys, 3, 'x'}\nheld.add(4)\nheld.discard(4)"
    ),
    "a method of a module list": "held = {REG.append, REG.pop, fa}\nheld.add(1)\nheld.discard(1)",
    "tuples of them": "held = {(fa, 1), (Ka, None), (None,)}\nheld.add(1)\nheld.discard(1)",
    "a dict keyed by range iterators": "held = {iter(range(3)): 1, iter(range(4)): 2}",
    "range iterators in a list": "held = [iter(range(3)), (iter(range(4)),)]",
    "instances hashed by value": "held = {Key(1), Key(2), Key(9)}\nheld.discard(Key(2))",
    "a frozenset subclass of ints": "held = Frozen(range(0, 300, 7))",
}


@pytest.mark.parametrize("case", list(ACCEPTED))
def test_a_set_of_objects_that_come_back_as_themselves_is_restored_in_its_order(case):
    wf = _compile(ACCEPTED[case] + "\n")
    cont = _suspend(wf)
    assert _refused_or_restored_in_order(cont, "held") is None


# ---------------------------------------------------------------------------------------------
# Another process

def _in_other_processes():
    """What ``corpus_sets.module_objects`` answers, checkpointed at its first await in a new
    interpreter and resumed in another one, both under ``PYTHONHASHSEED=3``."""
    how = dict(module="tests.workflows.corpus_sets", workflow_type="t", now=0.0, hash_seed=3)
    blob = resume_in_a_new_interpreter(None, workflow="module_objects", harness=False, **how)
    return resume_in_a_new_interpreter(blob, finish=True, **how)


def test_a_set_of_the_modules_objects_restores_in_another_process():
    """Functions, classes, module-level objects and None hash by their address, which another
    process does not give them: the set (its table recorded with dummies) comes back with the
    same elements in that process's own order, and the workflow goes on."""
    from . import corpus_sets

    names, size = _in_other_processes()
    held = [x for i, x in enumerate(corpus_sets.MODULE_OBJECTS) if i not in (4, 5)]
    assert size == len(names) == len(held)
    assert sorted(names) == sorted(map(corpus_sets.name_of, held))
