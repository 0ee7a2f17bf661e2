"""An int that is the ``id()`` of an object the checkpoint writes (or the ``hash()`` of one
hashed by its identity) comes back as the restored object's, so it still says which object it
was: a visited-by-id dict, an index keyed by ``id(obj)``, an id kept in an attribute
(corpus_probe2: objects_indexed_by_their_id). A set (or frozenset) of such ids, whose order is
made from the old addresses, cannot come back in its order: refused at the await, naming the
variable and saying what to hold instead; never accepted and then refused at the restore.
"""

from __future__ import annotations

import threading

import pytest

from workflows import CheckpointError, timer, workflow
from workflows.testing import WorkflowHarness

from .diffharness import resume_in_a_new_interpreter


class Node:
    def __init__(self, name):
        self.name = name


def visit():
    return "visit"


@workflow
async def visited_set_of_ids():
    a, b = Node("a"), Node("b")
    seen = set()
    for node in (a, b):
        seen.add(id(node))
        await timer("t", 1)
    return len(seen)


@workflow
async def frozenset_of_id_pairs():
    a, b = Node("a"), Node("b")
    marks = frozenset({(id(a), 1), (id(b), 2)})
    await timer("t", 1)
    return len(marks)


@workflow
async def set_of_identity_hashes():
    a, b = Node("a"), Node("b")
    hashes = {hash(a), hash(b)}
    await timer("t", 1)
    return hash(a) in hashes


@pytest.mark.parametrize(
    ("wf", "variable", "kind"),
    [
        (visited_set_of_ids, "seen", "id"),
        (frozenset_of_id_pairs, "marks", "id"),
        (set_of_identity_hashes, "hashes", "hash"),
    ],
    ids=lambda v: getattr(v, "__name__", None),
)
def test_a_set_of_ids_of_objects_the_checkpoint_copies_is_refused(wf, variable, kind):
    with pytest.raises(CheckpointError) as info:
        WorkflowHarness(wf, roundtrip=True)
    err = info.value
    msg = str(err)
    assert err.variable == variable, msg
    assert err.location and "await timer(" in msg
    if wf is frozenset_of_id_pairs and "iteration order" in msg:
        # A frozenset's own table may also be one a rebuild lays out otherwise (two of its
        # elements' hashes, made from these addresses, collide): refused for that first, and
        # for as good a reason.
        assert "a frozenset of 2 elements" in msg, msg
        return
    assert f"the {kind}() of a {__name__}.Node" in msg, msg
    assert "dict.fromkeys(...)" in msg and "del the variable" in msg


@workflow
async def set_of_ids_of_module_functions():
    ids = {id(visit), id(Node)}
    await timer("t", 1)
    return id(visit) in ids, id(Node) in ids, len(ids)


def test_a_set_of_ids_of_objects_kept_as_themselves_restores_in_this_process():
    """A module's function or class comes back as itself: its id is the same in this process."""
    h = WorkflowHarness(set_of_ids_of_module_functions, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == (True, True, 2)


@workflow
async def big_ints_that_are_no_ids(n):
    stamps = {1_700_000_000_000_000_000 + n, 2**62 + n}
    ids = [id(None) + 1, 123456789012345]
    await timer("t", 1)
    return sorted(stamps), ids[1]


def test_big_ints_that_are_no_ids_are_kept_as_they_are():
    h = WorkflowHarness(big_ints_that_are_no_ids, 3, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == ([1_700_000_000_000_000_003, 2**62 + 3], 123456789012345)


class Room:
    def __init__(self, name):
        self.name = name
        self.visitors = []


class Castle:
    def __init__(self):
        self.vault = Room("vault")


ROOMS = [Room("hall"), Room("keep")]
CASTLE = Castle()
BY_ID = {id(r): r for r in (*ROOMS, CASTLE.vault)}


@workflow
async def id_of_an_object_of_module_data(n, at_vault):
    room = CASTLE.vault if at_vault else ROOMS[1]
    key = id(room)
    await timer("t", 1)
    room.visitors.append(n)
    return BY_ID[key] is room, key == id(room), room.visitors is BY_ID[key].visitors


@pytest.mark.parametrize("at_vault", [False, True], ids=["list-item", "attribute"])
def test_the_id_of_an_object_of_module_data_is_kept(at_vault):
    """A local holding the id() of an object it reaches through module data (a room of a module
    list, or an attribute of a module instance, indexed by id in a module dict) comes back as
    that object's id: the checkpoint was refused with an excessively deep recursion."""
    h = WorkflowHarness(id_of_an_object_of_module_data, 4, at_vault, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == (True, True, True)


@workflow
async def only_the_id_of_an_object_of_module_data(n, how):
    key = id(ROOMS[n]) if how == "id" else hash(ROOMS[n])
    keys = {id(r): r.name for r in ROOMS}
    await timer("t", 1)
    room = BY_ID.get(key) if how == "id" else ROOMS[n]
    same = key == (id(room) if how == "id" else hash(room))
    return room is not None and room.name, same, sorted(BY_ID[k].name for k in keys if k in BY_ID)


REGISTRY = {}
BY_HASH = {}
for _name in ("attic", "cellar"):
    _room = Room(_name)
    REGISTRY[id(_room)] = _room  # a module dict keyed by the ids of its values
    _other = Room(_name)
    BY_HASH[hash(_other)] = _other  # and one by their identity hashes
del _room, _other, _name


@workflow
async def a_room_of_a_dict_keyed_by_identity_hashes(n):
    room = sorted(BY_HASH.values(), key=lambda r: r.name)[n]
    await timer("t", 1)
    return BY_HASH.get(hash(room)) is room and room.name


@workflow
async def a_room_of_a_dict_keyed_by_ids(n, hold):
    room = sorted(REGISTRY.values(), key=lambda r: r.name)[n]
    key = id(room)
    if hold == "id":
        del room
    await timer("t", 1)
    if hold == "id":
        return key in REGISTRY and REGISTRY[key].name
    if hold == "room":
        del key
        return REGISTRY.get(id(room)) is room and room.name
    return REGISTRY.get(key) is room and key == id(room) and room.name


def _in_a_new_process(wf, blob):
    """What the workflow returns at the step after ``blob``, restored in a new interpreter."""
    return resume_in_a_new_interpreter(blob, module=__name__, workflow_type=wf.__workflow_key__)


@pytest.mark.parametrize("how", ["id", "hash"])
def test_the_id_of_an_object_of_module_data_names_it_in_a_new_process(how):
    """A local holding only the id() (or the hash()) of an object of module data, not the object,
    and a dict keyed by such ids, name the module's object in the process that restores them:
    they kept the numbers of the process that wrote them, found in no module dict there."""
    h = WorkflowHarness(only_the_id_of_an_object_of_module_data, 1, how, roundtrip=False)
    got = _in_a_new_process(only_the_id_of_an_object_of_module_data, h.checkpoint())
    assert got == ("keep", True, ["hall", "keep"])
    h.fire_timer("t")
    assert h.result() == ("keep", True, ["hall", "keep"])


@pytest.mark.parametrize("hold", ["id", "room", "both"])
def test_an_object_of_a_module_dict_keyed_by_ids_is_the_module_s(hold):
    """A room of a module dict keyed by the ids of its rooms (``REGISTRY[id(room)] = room``),
    held by a local, its id or both, is the module's room after a restore, in this process and
    in a new one: the checkpoint found it through its key, an address of the process that wrote
    it (a copy came back in another process, and one the id did not name in this one)."""
    h = WorkflowHarness(a_room_of_a_dict_keyed_by_ids, 1, hold, roundtrip=False)
    assert _in_a_new_process(a_room_of_a_dict_keyed_by_ids, h.checkpoint()) == "cellar"
    h = WorkflowHarness(a_room_of_a_dict_keyed_by_ids, 1, hold, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == "cellar"


LOCKS = [threading.Lock(), threading.Lock()]
LOCK_NUMBERS = {id(lock): n for n, lock in enumerate(LOCKS)}


@workflow
async def the_id_of_a_module_lock(n):
    key = id(LOCKS[n])
    await timer("t", 1)
    return LOCK_NUMBERS.get(key)


def test_the_id_of_an_object_of_module_data_that_does_not_pickle_is_kept():
    """Only the way to it is written for such an id, never the object by value (a lock)."""
    h = WorkflowHarness(the_id_of_a_module_lock, 1, roundtrip=False)
    assert _in_a_new_process(the_id_of_a_module_lock, h.checkpoint()) == 1
    h = WorkflowHarness(the_id_of_a_module_lock, 1, roundtrip=True)
    h.fire_timer("t")
    assert h.result() == 1


def test_an_object_of_a_module_dict_keyed_by_identity_hashes_is_the_module_s():
    """The same for a module dict keyed by the identity hashes of its values."""
    h = WorkflowHarness(a_room_of_a_dict_keyed_by_identity_hashes, 1, roundtrip=False)
    assert _in_a_new_process(a_room_of_a_dict_keyed_by_identity_hashes, h.checkpoint()) == "cellar"
