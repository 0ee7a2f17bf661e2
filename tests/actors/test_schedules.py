"""Schedules (SPEC §13) on a virtual clock, on SQLite and PostgreSQL: a cron and an ``every``
schedule over a simulated week with restarts between, downtime under each ``catchup`` policy,
``overlap``, a crash between "tick due" and "workflow started", and a 3-node cluster whose leader
is killed at tick time; every tick starts exactly once (the workflows are counted by id)."""

from __future__ import annotations

import datetime as dt
import json
from collections import Counter

import pytest

from actors import ActorSystem, ScheduleInfo, Status
from actors import cli as wf_cli
from actors._schedules import run_id, tick_text
from actors.testing import VirtualClock
from persistence import _schedules as stored

from .sched_flows import report, slow_report, tick_seen

T = 30.0
HOUR = 3600.0
# 2024-01-01T00:00:00Z, a Monday: ticks fall on round times.
START = 1_704_067_200.0


def runs(system: ActorSystem, prefix: str) -> list[str]:
    """The ids of the workflows a schedule started, in order."""
    return sorted(i.id for i in system.workflows() if i.id.startswith(prefix + "@"))


def expected(prefix: str, ticks: list[float]) -> list[str]:
    return sorted(run_id(prefix, t) for t in ticks)


def test_a_cron_and_an_every_schedule_over_a_simulated_week_with_restarts(db: str) -> None:
    clock = VirtualClock(START)
    week = 7 * 24 * HOUR
    system = ActorSystem(db, clock=clock)
    try:
        for _day in range(7):
            # The application schedules at every start: the same ids again, which updates them
            # and keeps how far they got.
            # Six hourly ticks fall due at each step: each is started.
            hourly = system.schedule("hourly", report, "h", every=HOUR, overlap="allow")
            nightly = system.schedule(
                "nightly", report, "n", cron="30 2 * * *", timezone="Europe/Paris"
            )
            assert isinstance(hourly, ScheduleInfo) and hourly.every == HOUR
            assert nightly.cron == "30 2 * * *" and nightly.next_tick is not None
            for _ in range(4):
                clock.advance(6 * HOUR)
                system.idle(T)
            system.shutdown()  # a restart every day, the clock standing still meanwhile
            system = ActorSystem(db, clock=clock)
        system.idle(T)
        hours = [START + HOUR * k for k in range(1, 169)]
        assert runs(system, "hourly") == expected("hourly", hours)
        # 02:30 in Paris is 01:30 UTC in January, on each of the seven days.
        nights = [START + 86400 * d + 1.5 * HOUR for d in range(7)]
        assert runs(system, "nightly") == expected("nightly", nights)
        assert all(i.status is Status.COMPLETED for i in system.workflows())
        # Each run's tick is its info's scheduled_at; a workflow started by hand has none.
        first = system.get(run_id("nightly", nights[0])).info()
        assert first.scheduled_at == nights[0] and first.id == "nightly@2024-01-01T01:30:00Z"
        assert system.start(report, "x", id="by-hand").info().scheduled_at is None
        listed = {s.id: s for s in system.schedules()}
        assert listed["hourly"].next_tick == START + week + HOUR
        assert listed["hourly"].last_started == run_id("hourly", START + week)
        assert listed["nightly"].next_tick == START + week + 1.5 * HOUR
        rows = system._rt.store.read_table("SELECT workflow_id FROM sched_runs")
        # Every run's reducer ran once: one row each, none twice.
        assert Counter(r["workflow_id"] for r in rows) == Counter(
            runs(system, "hourly") + runs(system, "nightly") + ["by-hand"]
        )
    finally:
        system.shutdown()


@pytest.mark.parametrize("catchup, missed_started", [("latest", 1), ("all", 5), ("none", 0)])
def test_downtime_under_each_catchup_policy(db: str, catchup: str, missed_started: int) -> None:
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        # (Under the default overlap="skip": each run ends before the next tick is judged.)
        system.schedule("job", report, catchup, every=HOUR, catchup=catchup)
        for _ in range(2):
            clock.advance(HOUR)
            system.idle(T)
        assert len(runs(system, "job")) == 2
    clock.advance(5.5 * HOUR)  # down over the ticks of hours 3 to 7
    with ActorSystem(db, clock=clock) as system:
        system.idle(T)
        missed = [START + HOUR * h for h in range(3, 8)]
        want = {"latest": missed[-1:], "all": missed, "none": []}[catchup]
        assert runs(system, "job") == expected("job", [START + HOUR, START + 2 * HOUR, *want])
        assert len(want) == missed_started
        clock.advance(HOUR)  # the tick of hour 8 is on time, whatever the policy
        system.idle(T)
        assert run_id("job", START + 8 * HOUR) in runs(system, "job")
        assert system.schedules()[0].next_tick == START + 9 * HOUR


@pytest.mark.parametrize("overlap", ["skip", "allow"])
def test_overlap_skip_skips_ticks_while_the_previous_run_runs(db: str, overlap: str) -> None:
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("slow", slow_report, 2.5, every=HOUR, overlap=overlap)
        for _ in range(12):  # six hours, in half-hour steps
            clock.advance(HOUR / 2)
            system.idle(T)
        started = runs(system, "slow")
        if overlap == "skip":
            # Hour 1 runs until 3:30, so 2 and 3 are skipped; hour 4 runs until 6:30: 5 and 6 too.
            assert started == expected("slow", [START + HOUR, START + 4 * HOUR])
        else:
            assert started == expected("slow", [START + HOUR * h for h in range(1, 7)])


@pytest.mark.parametrize("run", ["ends in its first step", "waits for a signal"])
@pytest.mark.parametrize("when", [{"every": 60.0}, {"cron": "* * * * *"}])
def test_ticks_due_together_under_skip_are_judged_one_after_the_other(
    db: str, run: str, when: dict[str, object]
) -> None:
    """Ten ticks fall due in one round (the clock moved on ten periods at once): under
    overlap="skip" each is judged once the run of the one before has taken its first steps. A
    run that ends in its first step never makes the next tick skip; one that waits makes every
    next one skip. Three times over, the same: no thread's timing decides."""
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        for attempt in range(3):
            sid, base = f"m{attempt}", clock.now()
            if run == "ends in its first step":
                system.schedule(sid, report, sid, **when)  # type: ignore[arg-type]
            else:
                system.schedule(sid, tick_seen, sid, **when)  # type: ignore[arg-type]
            system.idle(T)
            skipped = system._schedules.skipped
            clock.advance(600)
            system.idle(T)
            ticks = [base + 60 * k for k in range(1, 11)]
            want = ticks if run == "ends in its first step" else ticks[:1]
            assert runs(system, sid) == expected(sid, want), attempt
            assert system._schedules.skipped - skipped == 10 - len(want)
            system.unschedule(sid)


def test_a_run_whose_start_is_never_handled_does_not_stop_its_schedule(db: str, monkeypatch) -> None:
    """A run started for a tick with more due after it whose actor never handles its start (its
    actor stopped first, say) does not stop the schedule for good: past JUDGE_GIVE_UP the next
    ticks are judged by what the store says of it (here: still running, so skipped)."""
    from actors import _schedules
    from actors._schedules import Schedules
    from persistence import Promise

    monkeypatch.setattr(_schedules, "JUDGE_WAIT", 0.0)
    monkeypatch.setattr(_schedules, "JUDGE_GIVE_UP", 0.0)
    monkeypatch.setattr(Schedules, "_kick", lambda self, seed, judge=False: Promise() if judge else None)
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("m", report, "m", every=60)
        system.idle(T)
        clock.advance(600)
        system.idle(T)
        assert runs(system, "m") == expected("m", [START + 60])
        assert system._schedules.skipped == 9


def test_idle_waits_for_a_tick_from_its_commit_until_its_workflow_is_handed_on(db: str, monkeypatch) -> None:
    """Once a tick's start commits the schedule is no longer due, and its workflow reaches the
    actors only after: ``idle`` in that gap would return before the workflow's first step (which
    then runs at a later clock reading, arming its timers late)."""
    from actors._schedules import Schedules

    clock = VirtualClock(START)
    seen: list[bool] = []
    real_kick = Schedules._kick
    with ActorSystem(db, clock=clock) as system:

        def kick(self, seed, judge=False):  # type: ignore[no-untyped-def]
            seen.append(system._idle_now())  # in the gap: committed, not handed on yet
            return real_kick(self, seed, judge)

        monkeypatch.setattr(Schedules, "_kick", kick)
        system.schedule("slow", slow_report, 2.5, every=HOUR)
        clock.advance(HOUR)
        system.idle(T)
        assert seen == [False]
        assert system.get(run_id("slow", START + HOUR)).info().status is Status.RUNNING


def test_a_crash_between_tick_due_and_workflow_started_starts_it_once(db: str, monkeypatch) -> None:
    """A crash before the tick's transaction commits leaves nothing: the next system starts the
    tick. A crash after it committed (its first step not run yet) leaves the workflow, which
    recovery runs, and the tick is not started again."""
    clock = VirtualClock(START)
    real = stored.start_tick
    system = ActorSystem(db, clock=clock)
    system.schedule("job", report, "j", every=HOUR)

    def crash_before_commit(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise TimeoutError("the process died here")

    monkeypatch.setattr(stored, "start_tick", crash_before_commit)
    clock.advance(HOUR)
    # The tick stays due: it is tried again with backoff (idle does not wait for a schedule in
    # backoff), never started.
    system.idle(T)
    assert system.schedules()[0].last_started is None
    system._crash()
    assert runs_of(db) == []
    monkeypatch.setattr(stored, "start_tick", real)

    # Now the commit goes in, and the process dies before the workflow's first step.
    system = ActorSystem(db, clock=clock)
    monkeypatch.setattr("actors._schedules.Schedules._kick", lambda self, seed: None)
    system.idle(T)
    assert runs_of(db) == [run_id("job", START + HOUR)]
    system._crash()
    monkeypatch.undo()
    with ActorSystem(db, clock=clock) as system:
        system.idle(T)
        ref = system.get(run_id("job", START + HOUR))
        assert ref.result(timeout=T) == "j"
        assert runs(system, "job") == [run_id("job", START + HOUR)]
        assert system.schedules()[0].last_started == ref.id


def runs_of(db: str) -> list[str]:
    from persistence import open_store

    store = open_store(db, owner=False)
    try:
        return sorted(r.id for r in store.list_workflows() if "@" in r.id)
    finally:
        store.close()


@pytest.mark.parametrize("catchup, started", [("latest", 1), ("none", 0), ("all", 60)])
def test_a_long_downtime_of_a_short_period_starts_what_catchup_says(
    db: str, catchup: str, started: int
) -> None:
    """Down ten minutes under a 10 s period: every tick due before the system came back was
    missed, those of its last minute too ("latest": one, "none": none; they are all counted)."""
    prometheus_client = pytest.importorskip("prometheus_client")
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("fast", report, "f", every=10, catchup=catchup, overlap="allow")
    clock.advance(600)
    registry = prometheus_client.CollectorRegistry()
    with ActorSystem(db, clock=clock, metrics=registry) as system:
        system.idle(T)
        assert len(runs(system, "fast")) == started
        if catchup == "latest":
            assert runs(system, "fast") == [run_id("fast", START + 600)]
        count = registry.get_sample_value
        assert (count("actorflow_schedule_ticks_total", {"outcome": "missed"}) or 0) == 60 - started
        assert (count("actorflow_schedule_ticks_total", {"outcome": "started"}) or 0) == started
        clock.advance(10)
        system.idle(T)
        assert run_id("fast", START + 610) in runs(system, "fast")  # then on time again


def test_a_restart_shorter_than_the_grace_loses_no_tick_even_under_none(db: str) -> None:
    clock = VirtualClock(START + HOUR - 5)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("hourly", report, "h", every=HOUR, catchup="none")
    clock.advance(10)  # down from 5 s before the hour to 5 s after
    with ActorSystem(db, clock=clock) as system:
        system.idle(T)
        assert runs(system, "hourly") == [run_id("hourly", START + HOUR)]


def test_rescheduled_with_another_timing_it_owes_no_tick_of_the_past(db: str) -> None:
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("p", report, "a", every=HOUR)
        clock.advance(HOUR + 30 * 60)  # the tick of the hour ran; now half past
        system.idle(T)
        assert runs(system, "p") == [run_id("p", START + HOUR)]
        info = system.schedule("p", report, "b", every=60)  # every minute from now on
        assert info.next_tick == START + HOUR + 31 * 60
        system.idle(T)
        assert runs(system, "p") == [run_id("p", START + HOUR)]  # none of 01:01 to 01:30
        same = system.schedule("p", report, "c", every=60)  # same timing: where it was
        assert same.next_tick == info.next_tick
        clock.advance(60)
        system.idle(T)
        assert runs(system, "p") == expected("p", [START + HOUR, START + HOUR + 31 * 60])


def test_arguments_of_the_wrong_type_are_type_errors_that_are_value_errors_too(db: str) -> None:
    """``every="60"``, ``cron=5``, ``timezone=0``, ``overlap=1`` and ``unschedule(5)`` are of the
    wrong type: a ``TypeError`` as Python raises for one (they were ``ValueError``s, and
    ``unschedule(5)`` returned False), which is also a ``ValueError`` as the arguments' other
    mistakes are, so that code catching either sees it."""
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        for kwargs, says in (
            ({"every": "60"}, "every= must be a positive number"),
            ({"every": True}, "every= must be a positive number"),
            ({"cron": 5}, "cron= must be a string"),
            ({"cron": "0 2 * * *", "timezone": 0}, "timezone= must be a zone name"),
            ({"every": 60, "overlap": 1}, "overlap= must be one of"),
            ({"every": 60, "catchup": None}, "catchup= must be one of"),
        ):
            with pytest.raises(TypeError, match=says) as caught:
                system.schedule("bad", report, "x", **kwargs)  # type: ignore[call-overload]
            assert isinstance(caught.value, ValueError)
        with pytest.raises(ValueError, match="every= must be a positive number") as bad:
            system.schedule("bad", report, "x", every=-1)
        assert not isinstance(bad.value, TypeError)  # a wrong value of the right type
        with pytest.raises(TypeError, match="unschedule.. takes a schedule id, a non-empty string, got 5"):
            system.unschedule(5)  # type: ignore[arg-type]
        assert system.schedules() == []


def test_schedule_checks_its_arguments_and_updates_unschedules_and_lists(db: str, capsys) -> None:  # type: ignore[no-untyped-def]
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        with pytest.raises(
            ValueError, match=r"invalid cron expression '61 \* \* \* \*': Bad minute.*five"
        ):
            system.schedule("bad", report, "x", cron="61 * * * *")
        with pytest.raises(ValueError, match="exactly one of cron="):
            system.schedule("bad", report, "x")
        with pytest.raises(ValueError, match="exactly one of cron="):
            system.schedule("bad", report, "x", cron="* * * * *", every=5)
        with pytest.raises(ValueError, match="every= must be a positive number"):
            system.schedule("bad", report, "x", every=0)
        with pytest.raises(ValueError, match="unknown time zone 'Mars/Olympus'"):
            system.schedule("bad", report, "x", cron="0 2 * * *", timezone="Mars/Olympus")
        with pytest.raises(ValueError, match=r"timezone='Europe/Paris' does nothing with every= .*cron="):
            system.schedule("daily", report, "x", every=86400, timezone="Europe/Paris")
        with pytest.raises(ValueError, match="overlap= must be one of 'skip', 'allow'"):
            system.schedule("bad", report, "x", every=60, overlap="queue")
        with pytest.raises(ValueError, match="catchup= must be one of 'latest', 'all', 'none'"):
            system.schedule("bad", report, "x", every=60, catchup="some")
        with pytest.raises(TypeError, match="needs a @workflow function"):
            system.schedule("bad", print, every=60)  # type: ignore[arg-type]
        # Arguments its workflow does not take fail here, as start() would, not at every tick.
        with pytest.raises(TypeError, match=r"schedule 'bad': report\(\) missing 1 required"):
            system.schedule("bad", report, every=60)
        with pytest.raises(TypeError, match="takes 1 positional argument but 2 were given"):
            system.schedule("bad", report, "x", "y", every=60)
        assert system.schedules() == []

        system.schedule("digest", report, "old", every=HOUR)
        info = system.schedule("digest", report, "new", cron="0 */2 * * *")  # updated in place
        assert (info.cron, info.every, info.next_tick) == ("0 */2 * * *", None, START + 2 * HOUR)
        assert [s.id for s in system.schedules()] == ["digest"]
        clock.advance(2 * HOUR)
        system.idle(T)
        assert system.get(run_id("digest", START + 2 * HOUR)).result(timeout=T) == "new"

        capsys.readouterr()
        assert wf_cli.main(["schedules", "--db", db]) == 0
        out = capsys.readouterr().out
        assert "digest" in out and "0 */2 * * *" in out and tick_text(START + 4 * HOUR) in out
        assert wf_cli.main(["schedules", "--db", db, "--json"]) == 0
        [row] = json.loads(capsys.readouterr().out)
        assert row["id"] == "digest" and row["next_tick"] == START + 4 * HOUR
        assert row["last_started"] == run_id("digest", START + 2 * HOUR)

        assert system.unschedule("digest") is True
        assert system.unschedule("digest") is False
        clock.advance(4 * HOUR)
        system.idle(T)
        assert runs(system, "digest") == [run_id("digest", START + 2 * HOUR)]  # it stays; no more


def test_a_run_sees_its_tick_in_info_across_a_restart_and_a_plain_start_sees_none(db: str) -> None:
    from workflows.testing import WorkflowHarness

    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("seen", tick_seen, "s", every=HOUR)
        system.start(tick_seen, "p", id="plain")
        clock.advance(HOUR)
        system.idle(T)
    with ActorSystem(db, clock=clock) as system:  # both load from the file now
        run = system.get(run_id("seen", START + HOUR))
        run.signal("go")
        system.get("plain").signal("go")
        assert run.result(timeout=T) == (START + HOUR, START + HOUR)
        assert system.get("plain").result(timeout=T) == (None, None)
    h = WorkflowHarness(tick_seen, "h", scheduled_at=START)
    h.send(None)
    assert h.result() == (START, START)


def test_a_workflow_defined_inside_a_function_is_refused_unless_its_module_defines_it(
    tmp_path, db: str
) -> None:
    """schedule() of a workflow defined inside a function, which a restarted system cannot find
    by importing its module, is a ValueError saying so and what to do, and stores nothing (its
    ticks ran until a restart, then every one failed). One that its module's own code defines
    (``NESTED_REPORT = made_with_module()``) is found by that import: scheduled, and its ticks
    start in a new process."""
    import os
    import subprocess
    import sys
    import textwrap

    from workflows import workflow

    from . import sched_flows

    @workflow
    async def here(name: str) -> str:
        return name

    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        for wf in (sched_flows.made_when_called(), here):
            with pytest.raises(ValueError, match=r"is defined inside a function, so a restarted system cannot find it") as e:
                system.schedule("nested", wf, "x", every=HOUR)  # type: ignore[call-overload]
            assert "define it at module level with @workflow" in str(e.value)
            assert "<locals>.nested_report" in str(e.value) or "<locals>.here" in str(e.value)
        assert system.schedules() == []
        system.schedule("nested", sched_flows.made_with_module(), "x", every=HOUR)  # type: ignore[call-overload]
        clock.advance(HOUR)
        system.idle(T)
        assert runs(system, "nested") == expected("nested", [START + HOUR])
    if db.startswith("postgresql://"):
        return  # the new process's part runs on the SQLite file
    script = tmp_path / "restart.py"
    script.write_text(textwrap.dedent(f"""
        from actors import ActorSystem
        from actors.testing import VirtualClock
        with ActorSystem({db!r}, clock=VirtualClock({START + 2 * HOUR!r})) as system:
            system.idle(timeout=30)
            print(sorted((i.id, str(i.status)) for i in system.workflows()))
    """))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "schedule_tick_failed" not in done.stderr, done.stderr
    assert done.stdout.strip() == str(
        [(run_id("nested", START + HOUR), "completed"), (run_id("nested", START + 2 * HOUR), "completed")]
    )


def test_tick_ids_are_iso_8601_utc() -> None:
    assert run_id("nightly", START) == "nightly@2024-01-01T00:00:00Z"
    assert tick_text(START + 0.25) == "2024-01-01T00:00:00.250000Z"
    assert dt.datetime.fromisoformat(tick_text(START).replace("Z", "+00:00")).timestamp() == START


def test_in_a_3_node_cluster_with_the_leader_killed_at_tick_time_every_tick_starts_once(
    pg_store_url: str,
) -> None:
    """The node that leads (holds shard 0) drives the schedules; killed just as a tick falls due,
    its successor as leader starts that tick (or finds it started): never none, never two."""
    from actors.testing import Cluster

    clock = VirtualClock(START)
    with Cluster(pg_store_url, 3, clock=clock) as cluster:
        cluster["node-2"].schedule("beat", report, "b", every=60.0, overlap="allow")
        ticks = []
        killed = []
        for k in range(1, 13):
            clock.advance(60.0)
            ticks.append(START + 60.0 * k)
            if k % 3 == 0:  # at the tick: before the leader's next round, or during its start
                leader = next(n for n, s in cluster.nodes.items() if s._leads())
                cluster.crash(leader)
                killed.append(leader)
                cluster.add()
            cluster.idle(T)
        assert len(killed) == 4  # (a new node of the same name may lead again: a new incarnation)
        node = next(iter(cluster))
        started = Counter(i.id for i in node.workflows() if i.id.startswith("beat@"))
        assert started == Counter(expected("beat", ticks))  # each tick exactly once
        assert all(node.get(w).result(timeout=T) == "b" for w in started)
        rows = node._rt.store.read_table("SELECT workflow_id FROM sched_runs")
        assert Counter(r["workflow_id"] for r in rows) == started  # each run's reducer once
        assert node.schedules()[0].next_tick == ticks[-1] + 60.0


def test_the_web_view_lists_the_schedules_with_their_next_tick(db: str) -> None:
    pytest.importorskip("starlette")
    from starlette.testclient import TestClient

    from actors._ui import create_app
    from persistence import open_store

    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("nightly", report, "n", cron="0 2 * * *", timezone="Europe/Paris")
        system.schedule("<b>x</b>", report, "x", every=90.0)
        clock.advance(HOUR)
        system.idle(T)
        store = open_store(db, owner=False)
        try:
            client = TestClient(create_app(store, db, allowed_hosts=frozenset({"testserver"})))
            page = client.get("/schedules").text
            assert "nightly" in page and "cron 0 2 * * * Europe/Paris" in page
            assert tick_text(START + HOUR + 86400) in page  # the next 02:00 in Paris, 01:00 UTC
            assert "every 90s" in page and "&lt;b&gt;x&lt;/b&gt;" in page and "<b>x</b>" not in page
            assert 'href="/schedules"' in client.get("/").text
        finally:
            store.close()


@pytest.mark.parametrize("fault", ["read", "start"])
@pytest.mark.parametrize("catchup, started", [("latest", 1), ("none", 0), ("all", 60)])
def test_a_long_storage_outage_is_downtime_that_catchup_applies_to(
    db: str, catchup: str, started: int, fault: str, monkeypatch
) -> None:
    """The storage away ten minutes under a 10 s period (the rounds cannot read the schedules,
    or the schedule's starts cannot commit): once it is back, the ticks due meanwhile were
    missed, as over a restart ("latest": the last one, "none": none, "all": every one). A fault
    shorter than MISSED_GRACE only makes the ticks due meanwhile late: they all start."""
    import threading

    from actors import _schedules
    from persistence import DiskFull

    monkeypatch.setattr(_schedules, "RETRY", (0.0, 0.0))  # a failed start is tried at each round
    failing, failed = threading.Event(), threading.Event()
    name = "due" if fault == "read" else "start_tick"
    real = getattr(stored, name)

    def faulty(*args, **kwargs):  # type: ignore[no-untyped-def]
        if failing.is_set():
            failed.set()
            raise DiskFull("the disk is full (test)", path=db)
        return real(*args, **kwargs)

    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("fast", report, "f", every=10, catchup=catchup, overlap="allow")
        system.idle(T)
        monkeypatch.setattr(stored, name, faulty)

        def away_for(seconds: float) -> None:
            failing.set()
            for _ in range(2):  # a round fails halfway, and one at the end
                clock.advance(seconds / 2)
                failed.clear()
                assert failed.wait(T)
            failing.clear()

        away_for(600)
        system.idle(T)
        missed = [START + 10 * k for k in range(1, 61)]
        want = {"latest": missed[-1:], "all": missed, "none": []}[catchup]
        assert runs(system, "fast") == expected("fast", want)
        assert len(want) == started
        # A short fault (shorter than MISSED_GRACE) is no downtime: its ticks start, late.
        away_for(30)
        system.idle(T)
        assert runs(system, "fast") == expected("fast", [*want, *(START + 600 + 10 * k for k in (1, 2, 3))])


def test_a_tick_whose_id_a_workflow_of_another_type_holds_is_skipped_saying_so(db: str) -> None:
    """A workflow of another type started by hand under a tick's id is no run of the schedule's:
    the tick is skipped with an ERROR naming the id, the workflow is not the schedule's latest run
    (nor its tick in ``info().scheduled_at``), and under overlap="skip" the next ticks start."""
    from structlog.testing import capture_logs

    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        system.schedule("job", report, "r", every=HOUR, overlap="skip")
        taken = run_id("job", START + HOUR)
        foreign = system.start(slow_report, 10.0, id=taken)  # runs ten (virtual) hours
        system.idle(T)
        with capture_logs() as logs:
            clock.advance(HOUR)
            system.idle(T)
        errors = [e for e in logs if e["event"] == "schedule_tick_id_taken"]
        assert [(e["log_level"], e["workflow_id"]) for e in errors] == [("error", taken)], logs
        assert "another type" in errors[0]["reason"]
        assert foreign.info().scheduled_at is None
        assert system.schedules()[0].last_started is None
        clock.advance(HOUR)  # the next tick starts: nothing of the schedule's runs
        system.idle(T)
        assert run_id("job", START + 2 * HOUR) in runs(system, "job")
        assert system.schedules()[0].last_started == run_id("job", START + 2 * HOUR)
        assert foreign.status() == Status.RUNNING


def test_cron_nicknames_tick_as_the_fields_they_stand_for(db: str) -> None:
    """``cron="@daily"`` (and ``@hourly``, ``@weekly``, ``@monthly``, ``@yearly``, ``@annually``,
    ``@midnight``, as crontab(5) has them) ticks as its five fields, in the schedule's zone;
    ``@reboot`` is refused saying what to do instead."""
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        info = system.schedule("d", report, "d", cron="@daily", timezone="Europe/Paris")
        assert info.cron == "@daily"  # listed as given
        system.schedule("h", report, "h", cron="@HOURLY")
        for name, fields in (("@weekly", "0 0 * * 0"), ("@monthly", "0 0 1 * *"),
                             ("@yearly", "0 0 1 1 *"), ("@annually", "0 0 1 1 *"),
                             ("@midnight", "0 0 * * *")):
            nick = system.schedule("n", report, "n", cron=name).next_tick
            assert nick == system.schedule("n", report, "n", cron=fields).next_tick, name
        assert system.unschedule("n")
        with pytest.raises(ValueError, match="'@reboot': the nicknames are @yearly.*every="):
            system.schedule("r", report, "r", cron="@reboot")
        for _ in range(48):
            clock.advance(HOUR)
            system.idle(T)
        # Midnight in Paris is 23:00 UTC in January.
        assert runs(system, "d") == expected("d", [START + 23 * HOUR, START + 47 * HOUR])
        assert len(runs(system, "h")) == 48


def test_every_takes_a_timedelta_as_its_seconds(db: str) -> None:
    """``every=timedelta(minutes=30)`` is ``every=1800``, as ``timer(after=)`` takes a timedelta:
    the same timing (scheduled again with the seconds, it goes on where it was)."""
    clock = VirtualClock(START)
    with ActorSystem(db, clock=clock) as system:
        info = system.schedule("half", report, "h", every=dt.timedelta(minutes=30))
        assert info.every == 1800.0 and info.next_tick == START + 1800
        clock.advance(HOUR)
        system.idle(T)
        assert system.schedule("half", report, "h", every=1800).last_started == run_id("half", START + HOUR)
        assert runs(system, "half") == expected("half", [START + 1800, START + HOUR])
        with pytest.raises(ValueError, match=r"every= must be a positive number of seconds \(or a timedelta\)"):
            system.schedule("neg", report, "n", every=dt.timedelta(seconds=-5))


def test_a_period_too_short_to_keep_or_too_long_to_tick_is_refused_at_schedule(tmp_path, capsys) -> None:  # type: ignore[no-untyped-def]
    """``every=1e-9`` was taken, and its ticks, closer than a float of the time tells apart, kept
    the schedules' rounds busy on one tick for good (``idle()`` timed out); ``every=1e20`` was
    taken with a first tick past the year 9999, which no run's id can hold, and ``wf schedules``
    then failed with an ``OverflowError``. Both are refused at ``schedule()``, saying why; a
    millisecond is the shortest period."""
    clock = VirtualClock(START)
    db = str(tmp_path / "wf.db")
    with ActorSystem(db, clock=clock) as system:
        for every in (1e-9, 0.0009):
            with pytest.raises(ValueError, match=r"every= must be 0.001 s \(a millisecond\) or more"):
                system.schedule("fast", report, "x", every=every)
        with pytest.raises(ValueError, match="has no tick before the year 10000"):
            system.schedule("never", report, "x", every=1e20)
        with pytest.raises(ValueError, match="has no tick before the year 10000"):
            system.schedule("never", report, "x", every=dt.timedelta(days=365 * 9000))
        assert system.schedules() == []
        system.schedule("ms", report, "x", every=0.001)
        clock.advance(0.003)
        system.idle(timeout=T)
        assert runs(system, "ms") == expected("ms", [START + 0.001, START + 0.002, START + 0.003])
    assert wf_cli.main(["schedules", "--db", db]) == 0
    assert "ms  " in capsys.readouterr().out


def test_every_takes_a_time_zone_whose_clock_is_utc_by_another_name(tmp_path) -> None:
    """``every=`` with ``timezone="Etc/UTC"``, ``"GMT"`` or ``"Zulu"`` (UTC by other names, where
    the zone changes nothing) ticks as with ``"UTC"``; they were refused as doing nothing. A zone
    off UTC part of the year (``Europe/London``) is still refused."""
    clock = VirtualClock(START)
    with ActorSystem(str(tmp_path / "wf.db"), clock=clock) as system:
        for zone in ("Etc/UTC", "GMT", "Zulu"):
            info = system.schedule(f"in-{zone.replace('/', '-')}", report, "x", every=HOUR, timezone=zone)
            assert (info.timezone, info.next_tick) == (zone, START + HOUR)
        with pytest.raises(ValueError, match=r"timezone='Europe/London' does nothing with every="):
            system.schedule("london", report, "x", every=HOUR, timezone="Europe/London")
        clock.advance(HOUR)
        system.idle(timeout=T)
        assert runs(system, "in-GMT") == expected("in-GMT", [START + HOUR])
        assert len(system.workflows()) == 3
