"""Retention (SPEC §10): a finished workflow is kept for ``retention`` seconds of the system's
clock, then deleted with every row it left by the running system; ``prune`` deletes now; a pruned
id is unknown, and the error says it may have been pruned."""

from __future__ import annotations

import threading

import pytest

from actors import ActorSystem, Status, UnknownWorkflow
from actors.testing import VirtualClock
from persistence._writes import WORKFLOW_TABLES
from workflows import gather, procedure, select, signal, spawn, subscribe, timer, workflow

from .runtime_support import Inside, reader

T = 30  # every wait in these tests is bounded
MINUTE = 60.0


@procedure
def triple(x: int) -> int:
    return 3 * x


@workflow
async def quick(x: int) -> int:
    return x


@workflow
async def busy(group: str) -> int:
    """Leaves a row in every table while it runs: a subscription, a procedure, a child, a timer,
    a wait, history."""
    subscribe("news", group)
    n = await procedure(triple, 2)
    kid = await spawn(quick, n)
    await timer("nap", 5)
    return kid + await signal("go")


@workflow
async def waits_for_kid_later(x: int) -> int:
    """Spawns a child that ends at once, and takes its outcome only once told to go."""
    go, kid = await gather(signal("go"), spawn(quick, x, id="the-kid"))
    return go + kid


@workflow
async def spawns_named(x: int) -> int:
    return await spawn(quick, x, id="named-kid")


@workflow
async def idles() -> str:
    """Runs forever, holding a timer, a wait and a subscription."""
    subscribe("news", "idle")
    await select(timer("far", 10 * 365 * 86400), signal("never"))
    return "woke"


@workflow
async def counts(n: int) -> int:
    total = 0
    for _ in range(n):
        total += await signal("inc")
    return total


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path) -> str:
    """The database: a SQLite file, or a PostgreSQL URL (a schema of the test's own)."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_store_url"))
    return str(tmp_path / "wf.db")


def rows_of(db: str, wid: str) -> dict[str, int]:
    """Rows in the database that belong to ``wid``: its record, and its rows in every keyed
    table (read through a read-only store; on PostgreSQL its connections' search_path is the
    store's schema)."""
    from persistence import open_store

    with open_store(db, owner=False) as store:
        def count(sql: str) -> int:
            return int(store.read_table(sql, (wid,))[0]["n"])

        counts = {"workflows": count("SELECT count(*) AS n FROM workflows WHERE id = ?")}
        for table in WORKFLOW_TABLES:
            counts[table] = count(f"SELECT count(*) AS n FROM {table} WHERE workflow_id = ?")
        return counts


def test_a_finished_workflow_goes_after_its_retention_with_every_row(db, clock) -> None:
    """Kept (record and history) until its retention has passed on the system's clock, then the
    running system deletes it and every row it left in every table, its child too; a workflow
    still running keeps every row of its own."""
    with ActorSystem(db, clock=clock, retention=MINUTE) as system:
        bystander = system.start(idles, id="bystander")
        ref = system.start(busy, "red", id="busy")
        system.idle(timeout=T)
        clock.advance(5)
        system.idle(timeout=T)
        (kid,) = [w.id for w in system.workflows() if w.parent_id == "busy"]
        running_rows = rows_of(db, "busy")
        assert running_rows["subscriptions"] and running_rows["waits"]
        ref.signal("go", 1)
        assert ref.result(timeout=T) == 7
        assert rows_of(db, "busy")["history"]  # the record is kept, with its history
        before = rows_of(db, "bystander")
        assert before["timers"] and before["waits"] and before["subscriptions"]

        # The child ended 5 s before its parent: 64 s ago for it, 59 s for the parent.
        clock.advance(MINUTE - 1)
        system.idle(timeout=T)
        assert system.get("busy").info().result == 7
        assert set(rows_of(db, kid).values()) == {0}

        clock.advance(2)
        system.idle(timeout=T)
        assert set(rows_of(db, "busy").values()) == {0}
        assert rows_of(db, "bystander") == before
        assert bystander.status() is Status.RUNNING
        assert [w.id for w in system.workflows()] == ["bystander"]


def test_a_finished_child_of_a_running_parent_is_pruned_and_the_parent_still_gets_its_outcome(db, clock) -> None:
    """The child's outcome is its parent's row (written by the child's last step), so deleting
    the child after its retention takes nothing the parent still needs."""
    with ActorSystem(db, clock=clock, retention=MINUTE) as system:
        ref = system.start(waits_for_kid_later, 5, id="parent")
        system.idle(timeout=T)
        assert system.get("the-kid").status() is Status.COMPLETED
        clock.advance(MINUTE + 1)
        system.idle(timeout=T)
        with pytest.raises(UnknownWorkflow):
            system.get("the-kid")
        assert ref.status() is Status.RUNNING
        ref.signal("go", 10)
        assert ref.result(timeout=T) == 15


def test_result_and_get_of_a_pruned_workflow_say_it_may_have_been_pruned(db, clock) -> None:
    """UnknownWorkflow names the id and, for a pruned workflow whose tombstone is kept, what it
    was and when it ended and was pruned; for another id, that it never existed or was pruned
    after its retention (this system's, and how many were pruned); before anything was pruned,
    that it never existed."""
    with ActorSystem(db, clock=clock) as system:
        with pytest.raises(UnknownWorkflow) as never:
            system.get("nope")
        assert "'nope'" in str(never.value)
        assert "it never existed (no finished workflow was ever pruned from this database)" in str(never.value)
        ref = system.start(quick, 1, id="q")
        assert ref.result(timeout=T) == 1
        clock.advance(7 * 86400 + 1)  # the default retention: a week
        system.idle(timeout=T)
        for call in (lambda: ref.result(timeout=T), lambda: system.get("q"), ref.status, ref.info,
                     lambda: ref.signal("x")):
            with pytest.raises(UnknownWorkflow) as info:
                call()
            msg = str(info.value)
            assert "no workflow with id 'q'" in msg
            # Its tombstone says what it was and when it went.
            assert "quick) ended completed at 2023-11-14 22:13:20Z and was pruned at 2023-11-21" in msg
            assert info.value.workflow_id == "q"
            # ... and so do its fields: a caller holding a ref to a workflow pruned since can
            # tell that it completed.
            assert (info.value.workflow_type, info.value.status) == (f"{__name__}:quick", "completed")
            assert info.value.status is Status.COMPLETED  # a Status, as WorkflowNotRunning's
            assert info.value.ended_at == 1_700_000_000.0
        with pytest.raises(UnknownWorkflow) as other:
            system.get("other")  # no tombstone: it never existed, or its tombstone expired too
        assert "it never existed, or it finished and was pruned after its retention" in str(other.value)
        assert "keeps finished workflows for 7d; 1 finished workflows pruned" in str(other.value)
        assert (other.value.workflow_type, other.value.status, other.value.ended_at) == (None, None, None)
    with ActorSystem(db, clock=clock, retention=None) as system:
        with pytest.raises(UnknownWorkflow, match=r"until pruned: retention=None; 1 finished"):
            system.get("other")


def test_result_right_after_a_prune_commits_reads_it_gone(db, clock) -> None:
    """Between a prune's commit and the runtime forgetting what it deleted, result() of a
    workflow that finished here (its outcome kept in memory) already says it is gone: no answer
    from memory once the delete can be seen."""
    with ActorSystem(db, clock=clock) as system:
        ref = system.start(quick, 1, id="q")
        assert ref.result(timeout=T) == 1
        retention = system._retention
        real, seen = retention.store.prune_finished, []

        def prune_then_ask(*args, **kwargs):
            ids = real(*args, **kwargs)  # committed: the row is gone, nothing forgotten yet
            if ids:
                with pytest.raises(UnknownWorkflow) as info:
                    ref.result(timeout=T)
                seen.append(info.value.workflow_id)
            return ids

        retention.store = type("Wrapped", (), {"__getattr__": lambda _, n: getattr(real.__self__, n),
                                              "prune_finished": staticmethod(prune_then_ask)})()
        clock.advance(1)
        assert system.prune(older_than=0) == 1
        assert seen == ["q"]


def test_retention_none_keeps_everything(db, clock) -> None:
    """retention=None: nothing is ever deleted by the system, however old."""
    with ActorSystem(db, clock=clock, retention=None) as system:
        refs = [system.start(quick, i) for i in range(5)]
        assert [r.result(timeout=T) for r in refs] == list(range(5))
        clock.advance(10 * 365 * 86400)
        system.idle(timeout=T)
        assert len(system.workflows(status="completed")) == 5
        assert all(rows_of(db, r.id)["history"] for r in refs)


def test_prune_counts_what_it_deleted(db, clock) -> None:
    """prune(older_than) deletes the workflows that finished more than older_than seconds ago,
    now, and returns how many; the others (running, or more recent) stay."""
    with ActorSystem(db, clock=clock, retention=None) as system:
        old = [system.start(quick, i) for i in range(30)]
        system.idle(timeout=T)
        clock.advance(3600)
        recent = [system.start(quick, i) for i in range(4)]
        running = system.start(idles)
        system.idle(timeout=T)
        clock.advance(60)
        assert system.prune(older_than=3600) == 30
        assert system.prune(older_than=3600) == 0
        assert sorted(w.id for w in system.workflows()) == sorted([r.id for r in recent] + [running.id])
        for r in old:
            assert set(rows_of(db, r.id).values()) == {0}
        assert system.prune(older_than=0) == 4
        assert [w.id for w in system.workflows()] == [running.id]


def test_prune_older_than_0_deletes_what_finished_at_this_very_time(db, clock) -> None:
    """prune(older_than=0) deletes every finished workflow, those that finished at this instant
    of the clock too (a VirtualClock that has not moved); before, it deleted none of them."""
    with ActorSystem(db, clock=clock, retention=None) as system:
        refs = [system.start(quick, i) for i in range(3)]
        assert [r.result(timeout=T) for r in refs] == [0, 1, 2]
        running = system.start(idles)
        system.idle(timeout=T)
        assert system.prune(older_than=0) == 3
        assert [w.id for w in system.workflows()] == [running.id]
        with pytest.raises(UnknownWorkflow, match="pruned"):
            refs[0].result(timeout=T)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"retention": -1}, ValueError, r"retention must be a finite number of seconds >= 0, got -1"),
        ({"retention": "7d"}, TypeError, r"retention must be a number of seconds or None .*'7d'"),
        ({"retention": float("inf")}, ValueError, r"finite"),
        ({"retention": True}, TypeError, r"got True"),
    ],
)
def test_bad_retention_is_refused(db, kwargs, error, match) -> None:
    with pytest.raises(error, match=match):
        ActorSystem(db, **kwargs)


def test_bad_older_than_is_refused(db, clock) -> None:
    with ActorSystem(db, clock=clock) as system:
        with pytest.raises(ValueError, match=r"prune\(older_than=...\) must be a finite number of seconds >= 0"):
            system.prune(older_than=-5)
        with pytest.raises(TypeError, match=r"must be a number of seconds, got '1h'"):
            system.prune(older_than="1h")


def test_an_id_pruned_while_its_actor_is_live_starts_a_new_workflow(db, clock) -> None:
    """A workflow pruned right after it ended (its actor still loaded): starting its id again
    runs a new workflow under it, not the finished one's memory."""
    with ActorSystem(db, clock=clock) as system:
        assert system.start(counts, 1, id="again").signal("inc", 4) is None
        assert system.get("again").result(timeout=T) == 4
        clock.advance(1)
        assert system.prune(older_than=0) == 1
        ref = system.start(counts, 2, id="again", reuse_id=True)  # its id stays taken otherwise
        assert ref.status() is Status.RUNNING
        ref.signal("inc", 1)
        ref.signal("inc", 2)
        assert ref.result(timeout=T) == 3


def test_a_child_id_pruned_while_its_actor_is_live_is_spawned_anew(db, clock) -> None:
    """A child spawned under a fixed id that was pruned (its actor still loaded, holding it
    finished): a later spawn of that id runs a new child, and its parent gets its result."""
    with ActorSystem(db, clock=clock) as system:
        assert system.start(spawns_named, 1).result(timeout=T) == 1
        clock.advance(1)
        assert system.prune(older_than=0) == 2
        assert system.start(spawns_named, 2).result(timeout=T) == 2
        assert system.get("named-kid").info().result == 2


def test_pruning_while_other_workflows_run(db, clock) -> None:
    """A prune of many finished workflows, while running ones take signals on another thread:
    every running workflow ends with the right result, and exactly the old ones are deleted."""
    with ActorSystem(db, clock=clock, retention=None) as system:
        system.start_many(quick, [(i,) for i in range(600)])
        system.idle(timeout=T)
        clock.advance(10)
        workers = [system.start(counts, 40, id=f"c{i}") for i in range(8)]
        Inside(system).retention.batch = 25  # many small batches, each between the running steps
        errors: list[BaseException] = []

        def drive() -> None:
            try:
                for _ in range(40):
                    for w in workers:
                        w.signal("inc", 1)
            except BaseException as e:  # reported by the main thread
                errors.append(e)

        t = threading.Thread(target=drive)
        t.start()
        pruned = system.prune(older_than=5)
        t.join(T)
        assert not t.is_alive() and errors == []
        assert pruned == 600
        assert [w.result(timeout=T) for w in workers] == [40] * 8
        assert sorted(w.id for w in system.workflows()) == sorted(w.id for w in workers)


# -- wf prune --------------------------------------------------------------------------------------
def wf(capsys, *argv: str) -> tuple[int, str, str]:
    from actors.cli import main

    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize(("text", "seconds"), [("90s", 90), ("30m", 1800), ("1h", 3600), ("7d", 604800),
                                               ("1.5h", 5400), ("0s", 0), ("0", 0),
                                               ("0.0", 0)])
def test_wf_prune_ages_take_units(text, seconds) -> None:
    from actors.cli import duration

    assert duration(text) == seconds


@pytest.mark.parametrize("text", ["1x", "10", "h", "1 hour", "", "1h30m"])
def test_wf_prune_refuses_an_age_without_a_unit(db, capsys, text) -> None:
    with ActorSystem(db):
        pass
    with pytest.raises(SystemExit) as info:
        wf(capsys, "prune", "--db", db, f"--older-than={text}")
    assert info.value.code == 1  # one line and status 1, as every wf error
    err = capsys.readouterr().err
    assert "argument --older-than: takes a number and a unit (s, m, h or d), e.g. 90s, 30m, 1h or 7d" in err
    assert repr(text) in err


@pytest.mark.parametrize("argv", [["--older-than=-1h"], ["--older-than", "-5s"]])
def test_wf_prune_refuses_a_negative_age_saying_so(db, capsys, argv) -> None:
    """A negative age is refused as one, also given as a separate word (which argparse took for
    an option: "expected one argument")."""
    with ActorSystem(db):
        pass
    with pytest.raises(SystemExit) as info:
        wf(capsys, "prune", "--db", db, *argv)
    assert info.value.code == 1
    err = capsys.readouterr().err
    assert "argument --older-than: is an age, which cannot be negative" in err, err


def test_wf_prune_needs_older_than_and_an_existing_file(tmp_path, capsys) -> None:
    with pytest.raises(SystemExit):
        wf(capsys, "prune", "--db", str(tmp_path / "x.db"))
    assert "--older-than" in capsys.readouterr().err
    code, _, err = wf(capsys, "prune", "--db", str(tmp_path / "x.db"), "--older-than", "1h")
    assert code == 1 and "does not exist" in err
    assert not (tmp_path / "x.db").exists()


def test_wf_prune_refuses_a_file_with_no_actorflow_schema_and_leaves_it_as_it_was(tmp_path, capsys) -> None:
    """An empty file is refused as `wf list` refuses it (no actorflow data yet), not made an
    actorflow database by the prune (it wrote the whole schema into it and said it pruned 0)."""
    empty = tmp_path / "empty.db"
    empty.touch()
    for argv in (["list"], ["prune", "--older-than", "1h"]):
        code, _, err = wf(capsys, *argv, "--db", str(empty))
        assert code == 1 and "holds no actorflow data yet" in err, (argv, err)
    assert empty.stat().st_size == 0


def test_wf_prune_on_a_file_no_system_owns(db, capsys) -> None:
    """With no system running, wf prune deletes itself (real clock here) and says how many."""
    with ActorSystem(db) as system:
        refs = [system.start(quick, i) for i in range(3)]
        assert [r.result(timeout=T) for r in refs] == [0, 1, 2]
        running = system.start(idles, id="keeps-running")
        system.idle(timeout=T)
    code, out, _ = wf(capsys, "prune", "--db", db, "--older-than", "1h")
    assert code == 0 and out.startswith("pruned 0 finished workflows that finished before ")
    code, out, _ = wf(capsys, "prune", "--db", db, "--older-than", "0s")
    assert code == 0 and out.startswith("pruned 3 finished workflows that finished before ")
    with ActorSystem(db) as system:
        assert [w.id for w in system.workflows()] == [running.id]
    code, _, err = wf(capsys, "show", refs[0].id, "--db", db)
    # What its tombstone keeps: its type, how it ended, when it was pruned (as system.get says).
    assert code == 1 and f"it ({quick.__workflow_key__}) ended completed at " in err and " was pruned at " in err
    code, _, err = wf(capsys, "show", "never-was", "--db", db)
    assert code == 1 and "it never existed, or it finished and was pruned after its retention (3 pruned so far)" in err


def test_wf_prune_measures_a_file_ahead_of_the_wall_clock_from_its_newest_finish(db, capsys) -> None:
    """A file written on an accelerated clock (the demo's) is ahead of this machine's: ages are
    measured from its newest finish, so only what is old on the file's own clock goes."""
    import time as _time

    clock = VirtualClock(start=_time.time() + 30 * 86400)
    with ActorSystem(db, clock=clock, retention=None) as system:
        old = system.start(quick, 1)
        system.idle(timeout=T)
        clock.advance(2 * 86400)
        new = system.start(quick, 2)
        system.idle(timeout=T)
    code, out, _ = wf(capsys, "prune", "--db", db, "--older-than", "1d")
    assert code == 0 and out.startswith("pruned 1 finished workflow that finished before ")
    assert "the file's clock is ahead of this machine's" in out
    with ActorSystem(db, clock=clock, retention=None) as system:
        assert [w.id for w in system.workflows()] == [new.id]
        with pytest.raises(UnknownWorkflow):
            system.get(old.id)


def test_wf_prune_through_a_running_system_on_its_clock(db, clock, capsys) -> None:
    """While a system owns the file, wf prune asks it; it prunes on its own (virtual) clock and
    the command prints its count."""
    with ActorSystem(db, clock=clock, retention=None) as system:
        system.start_many(quick, [(i,) for i in range(5)])
        running = system.start(idles)
        system.idle(timeout=T)
        clock.advance(7200)
        later = system.start(quick, 9)
        system.idle(timeout=T)
        code, out, err = wf(capsys, "prune", "--db", db, "--older-than", "1h")
        assert (code, err) == (0, "")
        assert out.splitlines()[-1].startswith(
            "pruned 5 finished workflows that finished more than 1h ago, through the running system (pid ")
        assert sorted(w.id for w in system.workflows()) == sorted([running.id, later.id])
        system.idle(timeout=T)
        with reader(db) as r:
            assert r.take_external(0) == []
            assert r.read_table("SELECT key FROM meta WHERE key LIKE 'external_result_%'") == []


def test_a_malformed_prune_request_is_answered_with_an_error(db, clock) -> None:
    """A request whose payload is not {"older_than": seconds} is answered with an error, and
    nothing is pruned."""
    from persistence import open_store

    with ActorSystem(db, clock=clock, retention=None) as system:
        system.start(quick, 1)
        system.idle(timeout=T)
        clock.advance(10)
        with open_store(db, owner=False) as reader:
            seq = reader.post_external("prune", "", None, '{"older_than": -3}', at=0.0)
            system.idle(timeout=T)
            answer = reader.take_external_result(seq)
        assert answer is not None and "bad prune request: older_than must be a finite number" in answer
        assert len(system.workflows()) == 1


def test_the_sweep_writes_nothing_while_nothing_is_due(db, clock) -> None:
    """A housekeeping round with no finished workflow past the retention reads one index entry
    and commits nothing (running workflows' commits are not joined by empty deletes)."""
    with ActorSystem(db, clock=clock, retention=MINUTE) as system:
        system.start(quick, 1).result(timeout=T)
        system.idle(timeout=T)
        inside = Inside(system)
        before = inside.commits()
        for _ in range(5):
            assert inside.retention.tick() is False
        assert inside.commits() == before
        clock.advance(MINUTE + 1)  # now it is due, and the sweep deletes it
        system.idle(timeout=T)
        assert system.workflows() == []
        assert inside.commits() > before


def test_wf_prune_on_a_url_goes_through_a_running_node_without_joining(pg_store_url, capsys) -> None:
    """On a PostgreSQL schema a node runs on, ``wf prune`` (another process) asks the cluster, as
    it asks a file's owner: it does not join the cluster itself, so no node row of its own is
    left behind. With no node running it prunes by itself, saying so, without joining either."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from persistence import open_store

    root = Path(__file__).resolve().parents[2]

    def wf_process(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "actors.cli", *argv], cwd=root, capture_output=True,
                              text=True, timeout=120, env=dict(os.environ, PYTHONPATH=str(root)))

    def node_rows() -> list[tuple[str, str]]:
        with open_store(pg_store_url, owner=False) as r:
            return sorted((n.node_id, n.state) for n in r.nodes())

    with ActorSystem(pg_store_url, retention=None) as system:
        refs = [system.start(quick, i) for i in range(4)]
        assert [r.result(timeout=T) for r in refs] == [0, 1, 2, 3]
        running = system.start(idles, id="keeps-running")
        system.idle(timeout=T)
        nodes = node_rows()
        out = wf_process("prune", "--db", pg_store_url, "--older-than", "0s")
        assert out.returncode == 0, out.stderr
        assert out.stdout.startswith("pruned 4 finished workflows that finished more than 0s ago, "
                                     "through the running system (pid "), out.stdout
        assert [w.id for w in system.workflows()] == [running.id]
        assert node_rows() == nodes  # the running node's row only: wf joined nothing
    with ActorSystem(pg_store_url, retention=None) as system:  # finishes some more, then leaves
        system.get("keeps-running").cancel()
        assert [system.start(quick, i).result(timeout=T) for i in range(3)] == [0, 1, 2]
        system.idle(timeout=T)
    nodes = node_rows()
    out = wf_process("prune", "--db", pg_store_url, "--older-than", "0s")
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("pruned 4 finished workflows that finished before "), out.stdout
    assert "(no node runs on it: pruned here, without joining the cluster)" in out.stdout
    assert node_rows() == nodes  # no row of its own
    with open_store(pg_store_url, owner=False) as r:
        assert r.count_workflows() == {}


def test_a_long_storage_outage_is_said_once_by_retention_and_its_end_once() -> None:
    """Every sweep of retention fails while the disk is full (an hour of tries, backing off to
    30 s): one WARNING ``retention_failed`` when it begins, the next tries at DEBUG, and one INFO
    ``retention_resumed`` with how many tries failed once a sweep passes."""
    from structlog.testing import capture_logs

    from actors import _retention
    from persistence import DiskFull

    full = [True]
    pruned: list[list[str]] = []

    class Store:
        def oldest_finished(self) -> float:
            return 0.0

        def prune_finished(self, cutoff: float, size: int, at: float) -> list[str]:
            if full[0]:
                raise DiskFull("the disk holding x.db is full", path="x.db")
            return ["old"]

    r = _retention.Retention(Store(), VirtualClock(), 10.0, pruned.append)  # type: ignore[arg-type]
    with capture_logs() as logs:
        for _ in range(120):
            r._retry_at = 0.0  # its backoff over: each tick is a try
            assert r.tick() is False
        full[0] = False
        r._retry_at = 0.0
        r.tick()
    said = [(e["event"], e["log_level"]) for e in logs if e["event"].startswith("retention")]
    assert said.count(("retention_failed", "warning")) == 1, said
    assert said.count(("retention_failed", "debug")) == 119
    assert [e["failures"] for e in logs if e["event"] == "retention_resumed"] == [120]
    assert pruned == [["old"]]
