"""Starting workflows: ids, refs, duplicates, bad arguments, a closed system.

Each test runs on SQLite and on PostgreSQL (the ``db`` fixture of ``conftest.py``).
"""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from actors import (
    ActorSystem,
    SystemClosed,
    UnknownWorkflow,
    WorkflowNotRunning,
    WorkflowRef,
)
from actors._actor import Kick

from . import flows
from .runtime_support import (
    Inside,
    T,
    _hex,
    _wait_until,
    record,
)

pytestmark = pytest.mark.usefixtures("fresh_flows")


def test_start_returns_once_the_first_step_is_committed_with_the_record(system, db):
    """start() has the first step committed with the record before it returns: the workflow is
    already at its first await, with no other work left (idle at once)."""
    ref = system.start(flows.waits_once, id="stepped-at-start")
    rec = record(db, ref.id)
    assert rec.step_seq == 1
    assert "go" in rec.waiting_on and "go" in ref.info().waiting_on
    system.idle(timeout=0)  # raises TimeoutError while any work is left


def test_a_poll_for_requests_that_finds_none_is_no_work_in_flight(system, db):
    """Housekeeping reads the `wf` requests after commits; a read that finds none is not work
    that ``idle`` waits for (it counted as such, so an ``idle(timeout=0)`` right after a start
    failed now and then, when it met that read)."""
    store = system._rt.store
    real = store.take_external
    polled, release = threading.Event(), threading.Event()

    def held(after: int) -> list:
        rows = real(after)
        if threading.current_thread().name == "actorflow-house":
            polled.set()
            release.wait(T)
        return rows

    store.take_external = held
    try:
        system.start(flows.waits_once, id="polled-after")  # a commit: the next round reads
        assert polled.wait(T)
        system.idle(timeout=0)  # the house holds its read: not work
    finally:
        release.set()
        del store.take_external


def test_a_start_after_a_message_to_its_id_still_runs(system, db):
    """An actor that looked for an id before any workflow had it (a message of the runtime came
    first) and is still live: a start of that id is not lost on its stale view, the workflow
    runs."""
    Inside(system).deliver("early", Kick())
    system.idle(timeout=T)
    assert system.live_actors() == 1
    ref = system.start(flows.waits_once, id="early")
    system.idle(timeout=T)
    assert record(db, "early").step_seq == 1
    ref.signal("go", "ran")
    assert ref.result(timeout=T) == "ran"


def test_two_starts_of_one_id_at_once_start_it_once(db, clock, held_commits):
    """A start whose first step is still uncommitted, and a second start of the same id: both
    return the same workflow, which runs its first step once."""
    with ActorSystem(db, clock=clock) as s:
        held = held_commits(s, only="twin")
        first: list = []
        second: list = []
        t = threading.Thread(target=lambda: first.append(s.start(flows.counter, 2, id="twin")))
        t.start()
        _wait_until(lambda: len(held) == 1, "the first start's step reached the writer")
        u = threading.Thread(target=lambda: second.append(s.start(flows.counter, 2, id="twin")))
        u.start()
        held_commits.let_go(s)
        t.join(T)
        u.join(T)
        assert first == second and len(first) == 1
        second = second[0]
        s.idle(timeout=T)
        assert record(db, "twin").step_seq == 1
        second.signal("inc", 1)
        second.signal("inc", 1)
        assert second.result(timeout=T) == 2
        assert len(s.workflows()) == 1


def test_start_existing_id_returns_ref(system):
    """Starting an id that exists returns a ref to it and starts nothing new."""
    a = system.start(flows.waits_once, id="same")
    b = system.start(flows.waits_once, id="same")
    assert a == b
    assert len(system.workflows()) == 1


def test_start_of_an_id_another_type_holds_is_refused_naming_both(system):
    """An existing id returns its workflow only to a start of the same type: a boss started
    under a counter's id must not get a ref to the counter (whose result is another type)."""
    system.start(flows.waits_once, id="boss-7")
    with pytest.raises(ValueError, match=r"cannot start tests\.actors\.flows:sleeper with id 'boss-7': the id "
                       r"is taken by a workflow of another type, tests\.actors\.flows:waits_once \(running\)"):
        system.start(flows.sleeper, 5.0, id="boss-7")
    assert [(w.id, w.type) for w in system.workflows()] == [("boss-7", "tests.actors.flows:waits_once")]


def test_start_many_of_an_id_another_type_holds_is_refused_before_any_starts(system):
    """start_many() as start(): an id of another type's workflow is a ValueError naming both,
    and nothing of the batch starts."""
    system.start(flows.waits_once, id="boss-8")
    with pytest.raises(ValueError, match=r"cannot start tests\.actors\.flows:sleeper with id 'boss-8'"):
        system.start_many(flows.sleeper, [(5.0,), (5.0,)], ids=["fresh-1", "boss-8"])
    assert [w.id for w in system.workflows()] == ["boss-8"]


@pytest.mark.parametrize("bad", ["line1\nline2", "esc\x1b[31mRED", "nul\x00", "del\x7f"])
def test_a_workflow_id_with_a_control_character_is_refused(system, bad):
    """An id is shown on one line by ``wf`` and typed back into a shell: a newline or an escape
    sequence in it (an id made from a player's name) is refused where it is given."""
    with pytest.raises(ValueError, match="holds the control character"):
        system.start(flows.waits_once, id=bad)
    with pytest.raises(ValueError, match="holds the control character"):
        system.start_many(flows.waits_once, [()], ids=[bad])
    assert system.workflows() == []


@pytest.mark.parametrize("bad", [".", "..", "zone/..", "../boss", "a/./b"])
def test_a_workflow_id_with_a_dot_segment_is_refused(system, bad):
    """An id is a part of the web view's addresses (``/w/ID``), where browsers remove ``.`` and
    ``..`` segments (encoded too): such a workflow's page could not be opened. Refused where it
    is given; ``...``, ``a.b`` and ``v1.2/3`` are ids like any."""
    with pytest.raises(ValueError, match=r"'\.' or '\.\.' path segment"):
        system.start(flows.waits_once, id=bad)
    with pytest.raises(ValueError, match=r"'\.' or '\.\.' path segment"):
        system.start_many(flows.waits_once, [()], ids=[bad])
    assert system.workflows() == []
    for fine in ("...", "a.b", "v1.2/3"):
        system.start(flows.waits_once, id=fine)
    assert sorted(w.id for w in system.workflows()) == ["...", "a.b", "v1.2/3"]


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda s, r: r.cancel(123), TypeError, r"cancel\(\) reason must be a str or None, got 123"),
        (lambda s, r: s.start(flows.waits_once, test_mode="yes"), TypeError, r"start\(\) test_mode must be True or False, got 'yes'"),
        (lambda s, r: s.start(flows.waits_once, id="x", reuse_id=1), TypeError, r"start\(\) reuse_id must be True or False, got 1"),
        (lambda s, r: s.start_many(flows.waits_once, [()], test_mode=None), TypeError, r"start_many\(\) test_mode must be"),
        (lambda s, r: s.broadcast(5, None, 1), TypeError, r"broadcast name must be a non-empty string, got 5"),
        (lambda s, r: s.broadcast("", None, 1), TypeError, r"broadcast name must be a non-empty string, got ''"),
        (lambda s, r: r.result(timeout="1"), ValueError, r"result\(\) timeout must be a number of seconds, 0 or more .*got '1'$"),
        (lambda s, r: r.result(timeout=-1), ValueError, r"result\(\) timeout must be a number of seconds"),
        (lambda s, r: s.idle(timeout=float("nan")), ValueError, r"idle\(\) timeout must be a number of seconds"),
        (lambda s, r: r.published("k", timeout="5"), ValueError, r"published\(\) timeout must be a number of seconds"),
    ],
)
def test_a_bad_argument_to_a_call_is_refused_naming_it(system, call, error, match):
    ref = system.start(flows.waits_once, id="here")
    with pytest.raises(error, match=match):
        call(system, ref)
    assert [w.id for w in system.workflows()] == ["here"]


@pytest.mark.parametrize("bad", ["1", True, [5], object()])
def test_a_timeout_that_is_no_number_is_a_type_error_and_a_value_error(system, bad):
    """A timeout of the wrong type is a ``TypeError``, as Python raises for a wrong type (and the
    ``ValueError`` of a bad timeout it always was); a negative one is a ``ValueError`` only."""
    ref = system.start(flows.waits_once, id="here")
    for call in (lambda: ref.result(timeout=bad), lambda: system.idle(timeout=bad),
                 lambda: ref.published("k", timeout=bad), lambda: ref.ask("q", timeout=bad)):
        with pytest.raises(TypeError, match="timeout must be a number of seconds") as caught:
            call()
        assert isinstance(caught.value, ValueError)
    with pytest.raises(ValueError) as negative:
        ref.result(timeout=-1)
    assert not isinstance(negative.value, TypeError)


def test_a_generated_id_already_taken_is_drawn_again(system, monkeypatch):
    """A generated id that happens to exist is someone else's workflow: start() and start_many()
    draw another instead of returning a ref to it."""
    taken = "a" * 12
    other = system.start(flows.waits_once, id=f"waits_once-{taken}")
    Inside.draw_ids(monkeypatch, taken, "b" * 12)
    mine = system.start(flows.waits_once)
    assert mine.id == "waits_once-" + "b" * 12
    Inside.draw_ids(monkeypatch, "c" * 12, taken, "c" * 12, "d" * 12)
    many = system.start_many(flows.waits_once, [(), (), ()])
    # The second collides with the existing workflow, the third with the first: both drawn again.
    assert [_hex(r) for r in many[:2]] == ["c" * 12, "d" * 12]
    assert _hex(many[2]) not in {taken, "b" * 12, "c" * 12, "d" * 12}
    system.idle(timeout=T)
    assert len(system.workflows()) == 5
    for r in (other, mine, *many):
        r.signal("go", r.id)
        assert r.result(timeout=T) == r.id


def test_unknown_and_finished_workflows_are_clear_errors(system):
    """get() of an unknown id raises UnknownWorkflow; signalling a finished one is an error."""
    with pytest.raises(UnknownWorkflow, match="nope"):
        system.get("nope")
    # An id that is not a string is a TypeError, as for start(id=...); it was an UnknownWorkflow
    # saying to check the id.
    for bad in (5, None, b"nope"):
        with pytest.raises(TypeError, match=f"workflow id must be a string, got {bad!r}"):
            system.get(bad)
    ref = system.start(flows.waits_once)
    ref.signal("go", 1)
    assert ref.result(timeout=T) == 1
    with pytest.raises(WorkflowNotRunning, match="already finished"):
        ref.signal("go", 2)


def test_refs_are_made_by_the_runtime(system):
    """Users cannot construct a WorkflowRef; the error says how to get one."""
    with pytest.raises(TypeError, match="system.start"):
        WorkflowRef(system, "x")


def test_start_many_starts_each_once(system):
    """start_many starts every workflow in one transaction; existing ids start nothing new."""
    first = system.start_many(flows.waits_once, [()] * 3, ids=["a", "b", "c"])
    again = system.start_many(flows.waits_once, [(), ()], ids=["c", "d"])
    assert [r.id for r in first + again] == ["a", "b", "c", "c", "d"]
    system.idle(timeout=T)
    assert sorted(w.id for w in system.workflows()) == ["a", "b", "c", "d"]
    for r in (first[0], again[1]):
        r.signal("go", r.id)
        assert r.result(timeout=T) == r.id
    with pytest.raises(ValueError, match="2 argument tuples but 1 ids"):
        system.start_many(flows.waits_once, [(), ()], ids=["x"])
    # Arguments not given as one tuple per workflow, and ids given as one string, are refused
    # saying what to write: they were `'int' object is not iterable`, and the string's
    # characters taken as ids (`ids="x"` started workflow 'x').
    with pytest.raises(TypeError, match=r"args must be a list of argument tuples, one per workflow, got 5 at index 0; write \[\(5,\), \.\.\.\]"):
        system.start_many(flows.collect, [5, 6])
    with pytest.raises(TypeError, match="ids must be a list of workflow ids, one per tuple of args, got 'y'"):
        system.start_many(flows.waits_once, [()], ids="y")
    assert sorted(w.id for w in system.workflows()) == ["a", "b", "c", "d"]


def test_refs_after_shutdown_raise_system_closed(db, clock):
    """status(), info() and result() of a ref after shutdown raise SystemClosed, as documented
    (they raised the store's StoreClosed); a second system in this process is told so."""
    from persistence import DatabaseLocked

    s = ActorSystem(db, clock=clock)
    ref = s.start(flows.collect, 1)
    with pytest.raises(DatabaseLocked, match="another ActorSystem .* in this very process"):
        ActorSystem(db, clock=clock)
    s.shutdown()
    for call in (ref.status, ref.info, ref.result):
        with pytest.raises(SystemClosed):
            call()
    # Entered again after its shutdown (a second `with s:`), it says so at once, and what to do.
    with pytest.raises(SystemClosed, match=r"was shut down; open a new ActorSystem\(.*\) to go on"):
        with s:
            pass

    async def enter_async() -> None:
        async with s:
            pass

    with pytest.raises(SystemClosed, match="was shut down"):
        asyncio.run(enter_async())
    # An in-memory database ends with its system: nothing to open again.
    mem = ActorSystem(":memory:", clock=clock)
    mem.shutdown()
    with pytest.raises(SystemClosed, match=r"^the ActorSystem on ':memory:' was shut down, and its in-memory database with it$"):
        mem.get("x")


def test_start_with_an_unpicklable_argument_names_the_argument(system):
    """An argument that cannot be pickled fails the start, naming the argument (the message
    spoke of a live local), and nothing is created."""
    from workflows import CheckpointError

    with pytest.raises(CheckpointError, match=r"cannot start workflow .*collect: its argument 'n' \(_thread.lock\)"):
        system.start(flows.collect, threading.Lock())
    with pytest.raises(CheckpointError, match="its argument 'n'"):
        system.start_many(flows.collect, [(1,), (threading.Lock(),)])
    assert system.workflows() == []


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"max_live": 2.5}, TypeError, r"max_live must be an int >= 1, got 2.5"),
        ({"max_live": 0}, ValueError, r"max_live must be an int >= 1, got 0"),
        ({"procedure_workers": True}, TypeError, r"procedure_workers must be an int >= 1, got True"),
        ({"procedure_workers": 0}, ValueError, r"procedure_workers must be an int >= 1, got 0"),
        ({"passivate_after": -1}, ValueError, r"passivate_after must be a finite number of seconds >= 0"),
        ({"passivate_after": "1m"}, TypeError, r"passivate_after must be a number of seconds, got '1m'"),
        ({"node_ttl": 0}, ValueError, r"node_ttl must be a finite number of seconds > 0, got 0"),
        ({"node_ttl": -1}, ValueError, r"node_ttl must be a finite number of seconds > 0, got -1"),
        ({"node_id": 7}, TypeError, r"node_id must be a string .*got 7"),
        ({"node_id": ""}, ValueError, r"node_id must be a non-blank string of at most 200 characters, got ''"),
        ({"node_id": "  "}, ValueError, r"node_id must be a non-blank string"),
        ({"node_id": "n" * 201}, ValueError, r"node_id must be a non-blank string of at most 200 characters"),
        ({"clock": time.time}, TypeError, r"clock must be a clock object such as actors\.testing\.VirtualClock\(\)"),
        ({"clock": "virtual"}, TypeError, r"clock must be a clock object .*got 'virtual'"),
    ],
)
def test_bad_system_options_are_refused_before_anything_opens(tmp_path, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        ActorSystem(str(tmp_path / "bad.db"), **kwargs)
    assert not (tmp_path / "bad.db").exists()  # refused before the file was made


def test_start_many_refuses_an_id_past_the_first_hundred_and_starts_the_rest_of_a_new_batch(system):
    """The ids of a start_many are read a hundred to a statement: an id another type holds far
    into a batch of 250 is still refused before any starts, and a batch that repeats an id and
    holds ones of the same type already starts only the new ones."""
    system.start(flows.waits_once, id="w-230")
    ids = [f"w-{i}" for i in range(250)]
    with pytest.raises(ValueError, match=r"cannot start tests\.actors\.flows:sleeper with id 'w-230'"):
        system.start_many(flows.sleeper, [(5.0,)] * 250, ids=ids)
    assert [w.id for w in system.workflows()] == ["w-230"]
    system.start_many(flows.sleeper, [(5.0,)] * 2, ids=["w-170", "w-3"])
    again = [f"w-{i}" for i in range(250) if i != 230] + ["w-170"]
    refs = system.start_many(flows.sleeper, [(5.0,)] * len(again), ids=again)
    assert [r.id for r in refs] == again
    assert sorted(w.id for w in system.workflows()) == sorted(ids)


def test_names_and_ids_longer_than_1000_bytes_are_refused_at_the_call_on_every_backend(system):
    """PostgreSQL's indexes take a few kilobytes an entry: an id or a name of 3 KB failed there
    at the commit (after the call returned), where SQLite took it. Every backend refuses one over
    MAX_TEXT_BYTES (UTF-8 bytes) at the call, saying so; one of 1,000 bytes is taken."""
    from workflows._errors import MAX_TEXT_BYTES

    assert MAX_TEXT_BYTES == 1000
    ok = "w" * 1000
    ref = system.start(flows.waits_once, id=ok)
    assert ref.id == ok
    for long in ("w" * 1001, "é" * 501):  # 1,001 and 1,002 bytes
        with pytest.raises(ValueError, match=r"bytes long \(UTF-8\): names and ids are kept to 1,000 bytes"):
            system.start(flows.waits_once, id=long)
        with pytest.raises(ValueError, match="names and ids are kept to 1,000 bytes"):
            ref.signal(long, 1)
        with pytest.raises(ValueError, match="names and ids are kept to 1,000 bytes"):
            system.start_many(flows.waits_once, [()], ids=[long])
    assert [w.id for w in system.workflows()] == [ok]


def test_the_errors_of_the_calls_pickle_and_copy_as_they_are(system):
    """An error a call raises can be pickled (to another process: a process pool, a task queue)
    and copied: WorkflowNotRunning, TimerNotArmed, InboxFull and AskFailed failed to (their
    __init__ takes other parameters than their args), and an UnknownWorkflow came back with
    its message wrapped in a second one. Each comes back with its message and attributes."""
    import copy
    import pickle

    from actors import AskFailed, DatabaseLocked, InboxFull, TimerNotArmed, WorkflowNotRunning
    from persistence import UnknownWorkflowId

    caught: list[BaseException] = []
    ref = system.start(flows.waits_once)
    with pytest.raises(TimerNotArmed) as armed:
        ref.debug_fire_timer("nope")
    caught.append(armed.value)
    ref.signal("go", 1)
    ref.result(timeout=T)
    with pytest.raises(WorkflowNotRunning) as ended:
        ref.signal("go", 2)
    caught.append(ended.value)
    with pytest.raises(UnknownWorkflow) as unknown:
        system.get("nope")
    caught.append(unknown.value)
    caught += [
        InboxFull("w", limit=3, path="x.db"),
        DatabaseLocked("x.db", pid=1, host="h", since=None),
        UnknownWorkflowId("w", path="x.db"),
        AskFailed("w", "q", "ask-1", "ValueError", "no"),
    ]
    for error in caught:
        for back in (pickle.loads(pickle.dumps(error)), copy.copy(error), copy.deepcopy(error)):
            assert type(back) is type(error)
            assert str(back) == str(error) and back.args == error.args
            assert vars(back) == vars(error)


def test_a_started_workflow_holds_a_copy_of_its_arguments(system):
    """A workflow's arguments are what its start stored, as after a restart: a dict the caller
    changed after start() (start_many(), start_async()) returned was the running workflow's own
    too, until the workflow was loaded again."""
    settings = {"level": 1}
    ref = system.start(flows.keeps_its_argument, settings)
    many = {"level": 1}
    (ref_many,) = system.start_many(flows.keeps_its_argument, [(many,)])

    async def start_async() -> tuple[WorkflowRef, dict]:
        given = {"level": 1}
        return await system.start_async(flows.keeps_its_argument, given), given

    ref_async, given = asyncio.run(start_async())
    system.idle(timeout=T)
    for changed in (settings, many, given):
        changed["level"] = 2
    for r in (ref, ref_many, ref_async):
        r.signal("go")
        assert r.result(timeout=T) == {"level": 1}

