"""A dict, set or frozenset whose key was changed after it was put in is refused at the await.

Natively the table keeps filing the key under the hash it had when it was put in: a lookup of
it misses, and a key that has come to equal another stays a second entry. A restore puts the
keys in again, with their hashes of then: the lookup would find it, the two equal keys would
become one (and a set's table, rebuilt exactly, would not match its record: refused at the
restore). So the checkpoint refuses such a container wherever it is held (a local, an instance,
a tuple key, a subclass), naming the variable, and says what to write instead; a key taken out
before it is changed and put back after is kept as it is.
"""

from __future__ import annotations

import collections

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import C, compare, run_compiled, run_native


class Key:
    """Hashed and compared by a field the program changes."""

    def __init__(self, v):
        self.v = v

    def __hash__(self):
        return hash(self.v)

    def __eq__(self, other):
        return isinstance(other, Key) and other.v == self.v

    def __repr__(self):
        return f"Key({self.v})"


class Holder:
    def __init__(self, table):
        self.table = table


class Tags(set):
    pass


@workflow
async def dict_key_changed():
    k = Key(1)
    d = {k: "a", Key(5): "b"}
    k.v = 2
    await timer("t", 1)
    return k in d, d.get(k)


@workflow
async def set_element_changed():
    k = Key(1)
    s = {k, Key(5)}
    k.v = 2
    await timer("t", 1)
    return k in s


@workflow
async def large_set_element_changed():
    ks = [Key(i) for i in range(20)]
    s = set(ks)
    ks[3].v = 100
    await timer("t", 1)
    return ks[3] in s


@workflow
async def frozenset_element_changed():
    k = Key(1)
    f = frozenset({k, Key(5), Key(9)})
    k.v = 2
    await timer("t", 1)
    return k in f


@workflow
async def keys_come_to_be_equal():
    a, b = Key(1), Key(2)
    d = {a: "a", b: "b"}
    a.v = 2
    await timer("t", 1)
    return len(d)


@workflow
async def ordered_dict_key_changed():
    k = Key(1)
    od = collections.OrderedDict([(k, 1), (Key(3), 2)])
    k.v = 7
    await timer("t", 1)
    return k in od


@workflow
async def counter_key_changed():
    k = Key(1)
    tally = collections.Counter([k, k, Key(3)])
    k.v = 7
    await timer("t", 1)
    return tally[k]


@workflow
async def defaultdict_key_changed():
    k = Key(1)
    groups = collections.defaultdict(list)
    groups[k].append(1)
    k.v = 7
    await timer("t", 1)
    return groups[k]


@workflow
async def set_subclass_element_changed():
    k = Key(1)
    tags = Tags([k, Key(3)])
    k.v = 7
    await timer("t", 1)
    return k in tags


@workflow
async def tuple_key_holding_a_changed_object():
    k = Key(1)
    d = {(k, "x"): 1}
    k.v = 2
    await timer("t", 1)
    return (k, "x") in d


@workflow
async def dict_inside_an_instance():
    k = Key(1)
    box = Holder({k: 1})
    k.v = 2
    await timer("t", 1)
    return k in box.table


REFUSED = [
    (dict_key_changed, "d", "dict"),
    (set_element_changed, "s", "set"),
    (large_set_element_changed, "s", "set"),
    (frozenset_element_changed, "f", "frozenset"),
    (keys_come_to_be_equal, "d", "dict"),
    (ordered_dict_key_changed, "od", "OrderedDict"),
    (counter_key_changed, "tally", "Counter"),
    (defaultdict_key_changed, "groups", "defaultdict"),
    (set_subclass_element_changed, "tags", "Tags"),
    (tuple_key_holding_a_changed_object, "d", "dict"),
    (dict_inside_an_instance, "box", "dict"),
]


@pytest.mark.parametrize(("wf", "variable", "kind"), REFUSED, ids=lambda v: getattr(v, "__name__", None))
def test_a_container_whose_key_was_changed_is_refused_at_the_await(wf, variable, kind):
    """Refused at the checkpoint (never accepted and then refused at the restore, nor restored
    with the key filed anew), naming the variable, the container, the key and the way out."""
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, roundtrip=True)
    err = info.value
    msg = str(err)
    assert err.variable == variable, msg
    assert f"'{variable}'" in msg
    assert f" {kind} " in msg and "Key(" in msg, msg
    assert err.location and "await timer(" in msg
    assert "d.pop(k)" in msg and "del the variable" in msg


def test_the_message_names_both_keys_that_came_to_be_equal():
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(keys_come_to_be_equal, roundtrip=True)
    assert "Key(2) and Key(2), now equal each other" in str(info.value)


@workflow
async def key_taken_out_changed_and_put_back(n):
    k = Key(n)
    d = {k: "a", Key(50): "b"}
    s = {k, Key(60)}
    v = d.pop(k)
    s.discard(k)
    k.v = n + 1
    d[k] = v
    s.add(k)
    await timer("t", 1)
    k2 = Key(n + 1)
    await timer("t", 1)
    return k in d, d[k2], k2 in s, sorted(x.v for x in s), list(d.values())


@workflow
async def key_changed_where_its_hash_does_not_look(n):
    class Tagged(Key):
        pass

    k = Tagged(n)
    d = {k: "a"}
    k.note = "seen"  # not part of the hash nor of equality
    await timer("t", 1)
    return k in d, d[Tagged(n)], k.note


@pytest.mark.parametrize("wf", [key_taken_out_changed_and_put_back, key_changed_where_its_hash_does_not_look])
@pytest.mark.parametrize("n", [1, 4])
def test_keys_changed_the_right_way_restore_as_they_were(wf, n):
    case = C(n)
    native = run_native(wf, case.args, case.oracle)
    assert native.outcome is not None and native.outcome[0] == "return", native.outcome
    compiled = run_compiled(wf, case.args, case.oracle, roundtrip=True)
    assert not compare(native, compiled, with_chain=True)
