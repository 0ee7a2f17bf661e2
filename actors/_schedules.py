"""Schedules (SPEC §13): start a workflow at each tick of a cron expression, or every N seconds.

A schedule is a row of the store (``persistence._schedules``), so it survives restarts, and its
ticks are driven on the system's clock by the system's housekeeping (a ``VirtualClock`` drives
them in tests): on a cluster, by the node that leads (holds shard 0). Each tick is started by one
transaction that creates the workflow ``f"{id}@{tick}"`` (the tick in ISO 8601 UTC) and moves the
schedule past the tick; start-by-id lets the id in once, so a tick starts exactly once across a
crash between "due" and "started" and across a change of leader.

Cron expressions are read by cronsim (five fields, or six with seconds first; ranges, steps,
names, ``L`` and ``#``), in the schedule's time zone through ``zoneinfo``, so a daily 02:30
follows the zone's daylight saving time. ``every`` counts seconds from the Unix epoch: every 3600
ticks on the hour (UTC).

After downtime (ticks that fell due before the driver began, up to the moment it began),
``catchup`` decides: ``"latest"`` starts the latest missed tick only, ``"all"`` every one (at most
``PER_ROUND`` per round, then the next round goes on), ``"none"`` none, unless the downtime held
one tick alone, due less than ``MISSED_GRACE`` seconds before (a restart, a change of leader: no
tick is lost to it). Ticks that fall due while the driver runs are all started, however late it
gets to them; but the storage away for ``MISSED_GRACE`` or longer is downtime too (the ticks due
before it came back were missed).

Under ``overlap="skip"`` a tick is skipped while the previous run still runs. Ticks that fall due
together (a busy round, a catch-up, a clock moved on) are judged one after the other, each once
the run started for the one before has taken every step it could take at that moment: a run that
ends in its first step never makes the next tick skip, however the threads are timed.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from actors._log import Log
from persistence import RUNNING, PersistenceError, StorageUnavailable, dumps, loads
from persistence import _schedules as stored
from persistence._promise import Promise
from persistence._schedules import ScheduleRow
from workflows._errors import MAX_TEXT_BYTES, check_id
from workflows._registry import found_after_restart, resolve

from ._actor import Kick

if TYPE_CHECKING:
    from persistence import NewWorkflow

    from ._clock import Clock


OVERLAP = ("skip", "allow")
CATCHUP = ("latest", "all", "none")
Overlap = Literal["skip", "allow"]
Catchup = Literal["latest", "all", "none"]
# Ticks that fell due before the driver began were missed (the system was down): ``catchup``
# applies to them. But the one tick of a downtime shorter than this (system clock seconds: a
# restart, a change of leader) is started even under ``"none"``.
MISSED_GRACE = 60.0
# Ticks one schedule starts in one round of the housekeeping (a catch-up of ``"all"`` after long
# downtime goes on over the next rounds, leaving the writer to the running workflows between).
PER_ROUND = 100
# After a failed round (storage away, a workflow type that cannot be imported), a schedule is
# tried again after this many seconds (real time), doubling up to the maximum.
RETRY = (0.5, 30.0)
# Seconds (real time) a round waits for a run it just started to take its first steps before it
# judges the next tick under overlap="skip"; a run slower than that is judged at a later round,
# and one whose start is never handled here (its actor stopped first) after JUDGE_GIVE_UP, by
# what the store says of it then.
JUDGE_WAIT = 5.0
JUDGE_GIVE_UP = 60.0

Seed = tuple["NewWorkflow", Any, bytes]
_Info = TypeVar("_Info", bound="_HasId")


class _HasId(Protocol):
    @property
    def id(self) -> str: ...


@dataclass(frozen=True)
class ScheduleInfo:
    """A schedule, as ``system.schedule()`` and ``system.schedules()`` return it.

    ``workflow`` is the workflow's type (``module:qualname``); ``cron`` or ``every`` (seconds) say
    when; ``next_tick`` is the next tick (epoch seconds; None once the expression has no more);
    ``last_started`` is the id of the latest workflow it started (None before the first).
    """

    id: str
    workflow: str
    cron: str | None
    every: float | None
    next_tick: float | None
    last_started: str | None
    timezone: str = "UTC"
    overlap: str = "skip"
    catchup: str = "latest"


def tick_text(tick: float) -> str:
    """A tick in ISO 8601 UTC, as in a scheduled workflow's id: ``2026-01-31T02:00:00Z``."""
    when = dt.datetime.fromtimestamp(tick, dt.UTC)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if when.microsecond else "%Y-%m-%dT%H:%M:%SZ")


# What a run's id adds to its schedule's: '@' and the tick, at its longest with microseconds.
RUN_ID_EXTRA = len("@2026-01-31T02:00:00.250000Z")


def run_id(schedule_id: str, tick: float) -> str:
    """The id of the workflow a schedule starts at ``tick``."""
    return f"{schedule_id}@{tick_text(tick)}"


# The shortest period of an every= schedule (seconds), and the latest tick a run's id can give
# (9999-12-31T23:59:59Z: the tick is written as a date).
MIN_EVERY = 0.001
LAST_TICK = 253_402_300_799.0


# The nicknames of cron (Vixie cron's, as crontab(5) lists them), which cronsim does not read.
CRON_NICKNAMES = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}


def cron_fields(cron: str) -> str:
    """``cron`` as the fields cronsim reads: a nickname (``@daily``) as the fields it stands for."""
    return CRON_NICKNAMES.get(cron.strip().lower(), cron)


class Timing:
    """When a schedule's ticks are: a cron expression in a time zone, or a period."""

    def __init__(self, cron: str | None, every: float | None, timezone: str) -> None:
        self.cron, self.every = cron, every
        self.zone = ZoneInfo(timezone)

    def _cron(self, after: float, reverse: bool = False) -> Iterator[float]:
        from cronsim import CronSim

        assert self.cron is not None
        start = dt.datetime.fromtimestamp(after, self.zone)
        for when in CronSim(cron_fields(self.cron), start, reverse=reverse):
            yield when.timestamp()

    def after(self, t: float) -> float | None:
        """The first tick strictly after ``t`` (None if there is none)."""
        if self.every is not None:
            return (math.floor(t / self.every) + 1) * self.every
        return next(self._cron(t), None)

    def last(self, t: float) -> float | None:
        """The last tick at or before ``t``."""
        if self.every is not None:
            return math.floor(t / self.every) * self.every
        # cronsim's reverse walk starts at the whole second before a time with microseconds.
        return next(self._cron(t + 1e-6, reverse=True), None)

    def count(self, a: float, b: float, most: int = 1_000_000) -> int:
        """How many ticks are in ``(a, b]`` (a cron expression's: up to ``most``)."""
        if b <= a:
            return 0
        if self.every is not None:
            return max(0, math.floor(b / self.every) - math.floor(a / self.every))
        n = 0
        for _ in self.between(a, b):
            n += 1
            if n >= most:
                break
        return n

    def between(self, a: float, b: float) -> Iterator[float]:
        """The ticks in ``(a, b]``, in order."""
        t = self.after(a)
        while t is not None and t <= b:
            yield t
            t = self.after(t)


class ArgumentTypeError(TypeError, ValueError):
    """An argument of ``schedule()`` or ``unschedule()`` of the wrong type: a ``TypeError``, as
    Python raises for one, and a ``ValueError``, as for the argument's other mistakes, so that
    code catching either sees it."""


def _is_utc(zone: ZoneInfo) -> bool:
    """True for a zone whose clock is UTC's (``Etc/UTC``, ``GMT``, ``Zulu``): no offset in winter
    or summer, from 1970 on."""
    return all(
        zone.utcoffset(dt.datetime(year, month, 1)) == dt.timedelta(0)
        for year in range(1970, 2101)
        for month in (1, 7)
    )


def timing(schedule_id: str, cron: str | None, every: float | None, timezone: str) -> Timing:
    """Check what ``schedule()`` was given for when, raising ``ValueError`` saying what is wrong
    (``ArgumentTypeError``, a ``ValueError`` and a ``TypeError``, for a value of the wrong type)."""
    where = f"schedule {schedule_id!r}"
    if (cron is None) == (every is None):
        raise ValueError(
            f"{where}: give exactly one of cron= (a cron expression) or every= (seconds)"
        )
    if every is not None:
        if (
            isinstance(every, bool)
            or not isinstance(every, int | float)
            or not math.isfinite(every)
            or every <= 0
        ):
            wrong = isinstance(every, bool) or not isinstance(every, int | float)
            raise (ArgumentTypeError if wrong else ValueError)(
                f"{where}: every= must be a positive number of seconds (or a timedelta), got {every!r}"
            )
        if every < MIN_EVERY:
            raise ValueError(
                f"{where}: every= must be {MIN_EVERY:g} s (a millisecond) or more, got {every!r}: "
                f"a run's id tells its tick to the microsecond, and a schedule starts at most "
                f"{PER_ROUND} runs a round, a few thousand a second: a shorter period falls "
                f"behind for good"
            )
    if not isinstance(timezone, str):
        raise ArgumentTypeError(
            f"{where}: timezone= must be a zone name such as 'Europe/Paris', got {timezone!r}"
        )
    try:
        zone = ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError) as e:
        raise ValueError(
            f"{where}: unknown time zone {timezone!r} ({e}); use an IANA name such as 'UTC' or "
            f"'Europe/Paris' (the system's tz database, or the tzdata package)"
        ) from None
    if every is not None and timezone != "UTC" and not _is_utc(zone):
        raise ValueError(
            f"{where}: timezone={timezone!r} does nothing with every= (its ticks are whole "
            f"multiples of {every!r} s since the epoch, in UTC); leave timezone= out, or give "
            f"the times of day as cron= in that zone (cron='0 0 * * *', timezone={timezone!r})"
        )
    if cron is not None:
        try:
            from cronsim import CronSim, CronSimError
        except ImportError:
            raise ImportError(
                "cron= schedules need cronsim, which is not installed; install the cron extra "
                "from a checkout with pip install -e '.[cron]' (every= schedules need nothing more)"
            ) from None
        if not isinstance(cron, str):
            raise ArgumentTypeError(f"{where}: cron= must be a string such as '0 2 * * *', got {cron!r}")
        try:
            next(iter(CronSim(cron_fields(cron), dt.datetime.now(zone))))
        except (CronSimError, StopIteration) as e:
            why = str(e) or "it matches no time"
            if cron.strip().startswith("@"):
                why = (
                    f"the nicknames are {', '.join(CRON_NICKNAMES)} (a schedule has no @reboot: "
                    f"start the workflow as the process starts; for a period, give every= seconds)"
                )
            raise ValueError(
                f"{where}: invalid cron expression {cron!r}: {why}. A cron expression has five "
                f"fields, minute hour day-of-month month day-of-week (or six, with seconds first): "
                f"'0 2 * * *' is 02:00 every day, '*/15 * * * 1-5' every 15 minutes on weekdays"
            ) from None
    return Timing(cron, float(every) if every is not None else None, timezone)


def info_of(row: ScheduleRow) -> ScheduleInfo:
    return ScheduleInfo(
        row.id,
        row.workflow,
        row.cron,
        row.every,
        row.next_tick,
        row.last_started,
        row.timezone,
        row.overlap,
        row.catchup,
    )


class Schedules:
    """A system's schedules: what ``schedule()``/``schedules()``/``unschedule()`` do, and the
    driver the housekeeping runs (``tick``) on the node that leads."""

    def __init__(
        self,
        rt: Any,
        clock: Clock,
        seed: Callable[[Any, str, str, tuple[Any, ...], float], Seed],
    ) -> None:
        self.rt, self.clock, self._seed = rt, clock, seed
        self.log: Log = rt.system_log.part("schedules")
        self.store: Any = rt.store
        # When this node began driving the schedules (system clock), while it does: from its
        # opening, or (a cluster's node) from the round that found it leading.
        self.since: float | None = clock.now()
        self._retry: dict[str, tuple[float, float]] = {}  # id -> (monotonic retry time, backoff)
        # Downtime that is not a restart: the storage away for MISSED_GRACE or longer (the rounds
        # could not read the schedules, or a schedule's start could not commit). What fell due
        # meanwhile was missed, as over a restart: ``catchup`` applies to it once the storage is
        # back. A shorter fault only makes the ticks due meanwhile late. ``_away``: since when
        # the rounds' reads fail; ``_back``: per schedule, since when its start fails on the
        # storage (system clock).
        self._away: float | None = None
        self._back: dict[str, float] = {}
        self.started = 0  # ticks this node started (a workflow created), for the tests and metrics
        self.skipped = 0
        # Per schedule under overlap="skip": the run started for a tick, with ticks due after it,
        # that has not taken its first steps yet (answered once its actor handled its start). The
        # schedule's next tick is judged only after.
        # A run that has not begun (another node's) is judged by what the store has of it.
        self._judging: dict[str, tuple[Promise[None] | _FirstSteps, float]] = {}  # (answer, monotonic deadline)
        self._judged: dict[str, str] = {}  # schedule id -> the last run it waited for, and no longer

    # -- the API ----------------------------------------------------------------------------------
    def schedule(
        self,
        schedule_id: str,
        wf: Any,
        args: tuple[Any, ...],
        cron: str | None,
        every: float | dt.timedelta | None,
        timezone: str,
        overlap: str,
        catchup: str,
    ) -> ScheduleInfo:
        if not isinstance(schedule_id, str) or not schedule_id:
            raise TypeError(f"a schedule id must be a non-empty string, got {schedule_id!r}")
        check_id(schedule_id, "schedule id")
        size = len(schedule_id.encode("utf-8"))
        if size + RUN_ID_EXTRA > MAX_TEXT_BYTES:
            # Else its runs got ids over the limit: started, then refused by get() and `wf`.
            raise ValueError(
                f"schedule id {schedule_id[:40]!r}... is {size:,} bytes long (UTF-8): each run's "
                f"workflow id is the schedule's, '@' and the tick (up to {RUN_ID_EXTRA} bytes "
                f"more), and ids are kept to {MAX_TEXT_BYTES:,} bytes; use a schedule id of at "
                f"most {MAX_TEXT_BYTES - RUN_ID_EXTRA:,} bytes"
            )
        key = getattr(wf, "__workflow_key__", None)
        if key is None:
            raise TypeError(
                f"system.schedule({schedule_id!r}, ...) needs a @workflow function, got {wf!r}"
            )
        if not found_after_restart(key):
            # Its ticks run after restarts, where the workflow is found by importing its module,
            # which does not define it: every tick of a restarted system failed.
            raise ValueError(
                f"schedule {schedule_id!r}: workflow {key} is defined inside a function, so a "
                f"restarted system cannot find it (importing {key.partition(':')[0]!r} does not "
                f"define it) and every tick after a restart would fail; define it at module level "
                f"with @workflow (or give it @workflow(name=...) in a module the application imports)"
            )
        if overlap not in OVERLAP:
            raise (ValueError if isinstance(overlap, str) else ArgumentTypeError)(
                f"schedule {schedule_id!r}: overlap= must be one of {', '.join(map(repr, OVERLAP))}, got {overlap!r}"
            )
        if catchup not in CATCHUP:
            raise (ValueError if isinstance(catchup, str) else ArgumentTypeError)(
                f"schedule {schedule_id!r}: catchup= must be one of {', '.join(map(repr, CATCHUP))}, got {catchup!r}"
            )
        if isinstance(every, dt.timedelta):  # as timer(after=) and procedure(timeout=) take it
            every = every.total_seconds()
        when = timing(schedule_id, cron, every, timezone)
        try:
            wf.start(*args)  # bound as start() binds them: a wrong call fails here, not each tick
        except TypeError as e:
            raise TypeError(
                f"schedule {schedule_id!r}: {e}; each tick starts {key} with the arguments given "
                f"to schedule()"
            ) from None
        try:
            blob = dumps(tuple(args))
        except Exception as e:
            raise TypeError(
                f"schedule {schedule_id!r}: its arguments cannot be pickled ({e}); pass plain data"
            ) from e
        now = self.clock.now()
        first = when.after(now)
        if first is not None and first > LAST_TICK:
            raise ValueError(
                f"schedule {schedule_id!r}: every={when.every!r} s has no tick before the year "
                f"10000 (a run's id holds its tick as a date), so it would never start anything; "
                f"give a shorter period"
            )
        old = stored.schedule(self.store, schedule_id)
        # Updated with the same timing, it goes on where it was; with another, its ticks are
        # those of the new timing from now on (none of the past is owed to a timing just set).
        same = old is not None and (old.cron, old.every, old.timezone) == (cron, when.every, timezone)
        done_until = old.done_until if old is not None and same else now
        row = ScheduleRow(
            schedule_id,
            key,
            blob,
            cron,
            when.every,
            timezone,
            overlap,
            catchup,
            now,
            now,
            done_until,
            when.after(done_until),
            None,
        )
        stored.put(self.store, row)
        self._retry.pop(schedule_id, None)
        self.log.info(
            "schedule_set",
            schedule_id=schedule_id,
            workflow_type=key,
            cron=cron,
            every=when.every,
            updated=old is not None,
            next_tick=row.next_tick,
        )
        got = stored.schedule(self.store, schedule_id)
        return info_of(got if got is not None else row)

    def schedules(self) -> list[ScheduleInfo]:
        return [info_of(r) for r in stored.schedules(self.store)]

    def unschedule(self, schedule_id: str) -> bool:
        if not isinstance(schedule_id, str) or not schedule_id:
            raise TypeError(f"unschedule() takes a schedule id, a non-empty string, got {schedule_id!r}")
        gone = stored.delete(self.store, schedule_id)
        self.log.info("schedule_removed", schedule_id=schedule_id, found=gone)
        return gone

    def with_ticks(self, infos: list[_Info]) -> list[_Info]:
        """``infos`` with ``scheduled_at`` set on the workflows a schedule started."""
        maybe = [i.id for i in infos if "@" in i.id]
        if not maybe:
            return infos
        ticks = stored.ticks_of(self.store, maybe)
        return [replace(i, scheduled_at=ticks[i.id]) if i.id in ticks else i for i in infos]  # type: ignore[type-var]

    # -- the driver -------------------------------------------------------------------------------
    def due(self, leads: bool) -> bool:
        """True if this node drives the schedules and a tick is due now (what ``idle`` waits for)."""
        if not leads:
            return False
        now, mono = self.clock.now(), time.monotonic()
        return any(
            self._retry.get(r.id, (0.0, 0.0))[0] <= mono for r in stored.due(self.store, now)
        )

    def away(self) -> None:
        """The storage is away (this round, or the housekeeping's, failed on it): from when, for
        ``catchup`` once it is back."""
        if self._away is None:
            self._away = self.clock.now()

    def tick(self, leads: bool) -> None:
        """One round: start (or skip) every tick due now. Called by the housekeeping loop."""
        if not leads:
            self.since = None
            return
        now = self.clock.now()
        if self.since is None:
            self.since = now
        mono = time.monotonic()
        try:
            rows = stored.due(self.store, now)
        except PersistenceError as e:
            # The store is away: the writes' own episode is logged by the runtime; look again
            # at the next round.
            self.log.debug("schedule_read_failed", error=str(e))
            self.away()
            return
        if self._away is not None:
            if now - self._away >= MISSED_GRACE:  # back from downtime: what fell due was missed
                self.since = max(self.since, now)
            self._away = None
        if not rows:
            return
        # The round is work while it runs: once a tick's start commits, the schedule is no longer
        # due, but its workflow is handed to the actors only after; ``idle`` must not see the gap.
        work = self.rt.work
        work.inc()
        try:
            self._run_due(rows, now, mono)
        finally:
            work.dec()

    def _run_due(self, rows: list[ScheduleRow], now: float, mono: float) -> None:
        for row in rows:
            retry_at, backoff = self._retry.get(row.id, (0.0, 0.0))
            if retry_at > mono:
                continue
            judging = self._judging.get(row.id)
            last = row.last_started
            if (
                judging is None
                and row.overlap == "skip"
                and last is not None
                and self._judged.get(row.id) != last
            ):
                # Its last run may not have begun yet (started in a round before, its shard
                # another node's, which has not run it): it is judged once it has taken its first
                # steps, as within one round; not as still running because it had not begun.
                first = _FirstSteps(self.store, last)
                if not first.done():
                    judging = self._judging[row.id] = (first, time.monotonic() + JUDGE_GIVE_UP)
            if judging is not None:
                handled, deadline = judging
                if not handled.done() and time.monotonic() < deadline:
                    continue  # its last run has not taken its first steps: judged at a later round
                del self._judging[row.id]
                if last is not None:
                    self._judged[row.id] = last  # (given up on: judged by the store from now on)
            try:
                self._run(row, now)
                self._retry.pop(row.id, None)
                self._back.pop(row.id, None)
            except Exception as e:
                backoff = min(max(backoff * 2, RETRY[0]), RETRY[1])
                self._retry[row.id] = (time.monotonic() + backoff, backoff)
                if isinstance(e, StorageUnavailable | TimeoutError):
                    self._back.setdefault(row.id, now)
                level = self.log.warning if isinstance(e, PersistenceError | TimeoutError) else self.log.error
                level(
                    "schedule_tick_failed",
                    schedule_id=row.id,
                    workflow_type=row.workflow,
                    error=f"{type(e).__name__}: {e}",
                    retry_in=backoff,
                )

    def _plan(self, row: ScheduleRow, when: Timing, now: float) -> list[tuple[float, bool]]:
        """The ticks to do now, in order: (tick, start it) (False: move past it, starting none)."""
        assert self.since is not None
        plan: list[tuple[float, bool]] = []
        start = row.done_until
        # The end of the last downtime: this node's start (or lead), or the storage's return.
        since = self.since
        failing = self._back.get(row.id)
        if failing is not None and now - failing >= MISSED_GRACE:
            since = max(since, now)
        missed_until = min(now, since)
        if start < missed_until:
            if row.catchup == "all":
                plan = [
                    (t, True)
                    for _, t in zip(
                        range(PER_ROUND), when.between(start, missed_until), strict=False
                    )
                ]
                if len(plan) == PER_ROUND:
                    return plan
            else:
                last = when.last(missed_until)
                if last is not None and last > start:
                    # "none" starts none of them, unless the downtime held this one tick alone,
                    # due shortly before: a restart or a change of leader loses no tick.
                    brief = last >= since - MISSED_GRACE and when.after(start) == last
                    plan = [(last, row.catchup == "latest" or brief)]
            if plan:
                start = plan[-1][0]
            if row.catchup != "all" and missed_until > start:
                plan.append((missed_until, False))  # the rest of the downtime held no tick to start
                start = missed_until
        for t in when.between(start, now):
            if len(plan) >= PER_ROUND:
                break
            plan.append((t, True))
        return plan

    def _run(self, row: ScheduleRow, now: float) -> None:
        when = Timing(row.cron, row.every, row.timezone)
        plan = self._plan(row, when, now)
        if not plan:
            return  # another driver moved it on since this one read it (its row is stale)
        wf = resolve("workflow", row.workflow)
        args = loads(row.args)
        last = row.last_started
        done = row.done_until
        for i, (tick, start) in enumerate(plan):
            # The ticks it moves past without starting them (a catch-up's), for the metric.
            missed = when.count(done, tick) - (1 if start else 0)
            done = tick
            seed = self._seed(wf, row.workflow, run_id(row.id, tick), args, now) if start else None
            if seed is not None:
                seed = (replace(seed[0], scheduled_at=tick), seed[1], seed[2])
            outcome = stored.start_tick(
                self.store,
                row.id,
                tick,
                seed[0] if seed else None,
                next_tick=when.after(tick),
                skip_while_running=last if row.overlap == "skip" else None,
            ).result(self.rt.commit_timeout)
            metrics = self.rt.metrics
            if metrics is not None and outcome != "existed":  # (that one, its starter counted)
                metrics.count("ticks", "missed", n=missed)
                if start:
                    metrics.count("ticks", "skipped" if outcome == "taken" else outcome)
            if outcome == "started" and seed is not None:
                self.started += 1
                if metrics is not None:
                    metrics.workflow_started(row.workflow)
                self.rt.workflow_log.info(
                    "workflow_started",
                    workflow_id=seed[0].id,
                    workflow_type=row.workflow,
                    test_mode=False,
                    schedule_id=row.id,
                )
                last = seed[0].id
                # Another tick to judge after this one: it waits for this run's first steps.
                judge = row.overlap == "skip" and any(s for _, s in plan[i + 1:])
                handled = self._kick(seed, judge)
                self.log.info(
                    "schedule_tick_started",
                    schedule_id=row.id,
                    workflow_id=seed[0].id,
                    workflow_type=row.workflow,
                    tick=tick_text(tick),
                    late=round(now - tick, 3),
                )
                if judge and handled is None:
                    # Its shard is another node's, which runs it when its wake-up comes: the
                    # ticks after it are judged at a later round (``_run_due``), once the store
                    # shows the run's first steps (judged at once, it would still look running).
                    return
                if handled is not None and not _waited(handled, min(JUDGE_WAIT, self.rt.commit_timeout)):
                    self._judging[row.id] = (handled, time.monotonic() + JUDGE_GIVE_UP)
                    return  # the ticks after it are judged at a later round
            elif outcome == "existed" and seed is not None:
                last = seed[0].id
            elif outcome == "taken" and seed is not None:
                self.skipped += 1
                self.log.error(
                    "schedule_tick_id_taken",
                    schedule_id=row.id,
                    tick=tick_text(tick),
                    workflow_id=seed[0].id,
                    reason=f"a workflow of another type than {row.workflow!r} holds the tick's id "
                           f"(started under it by hand): the tick is skipped; start no workflow under "
                           f"an id of the form '{row.id}@<tick>'",
                )
            elif start:
                self.skipped += 1
                self.log.info(
                    "schedule_tick_skipped",
                    schedule_id=row.id,
                    tick=tick_text(tick),
                    reason=f"its previous run {last!r} still runs (overlap='skip')",
                )
            else:
                self.log.info(
                    "schedule_ticks_missed",
                    schedule_id=row.id,
                    until=tick_text(tick),
                    catchup=row.catchup,
                )

    def _kick(self, seed: Seed, judge: bool = False) -> Promise[None] | None:
        """Run a workflow just created by a tick: here if its shard is this node's, else its
        owner's (the commit left it a wake-up). ``judge``: the promise answered once its actor
        has handled the start (None for a run another node starts: judged as the store has it)."""
        cluster = self.rt.cluster
        wid = seed[0].id
        if cluster.owns_new(wid):
            handled: Promise[None] | None = Promise() if judge else None
            self.rt.activator.deliver(wid, Kick(seed, handled=handled))
            return handled
        cluster.publish_wake()
        return None


class _FirstSteps:
    """Whether a run started for a tick on another node has taken its first steps (or ended,
    or is gone), as the store has it: what its starter waits for before it judges the next tick
    under overlap="skip"."""

    def __init__(self, store: Any, workflow_id: str) -> None:
        self.store, self.workflow_id = store, workflow_id

    def done(self) -> bool:
        try:
            record = self.store.load_workflow(self.workflow_id)
        except PersistenceError:
            return False  # asked again at the next round
        return record is None or record.step_seq > 0 or record.status != RUNNING


def _waited(promise: Promise[None], timeout: float) -> bool:
    """True once ``promise`` is answered (within ``timeout`` seconds)."""
    try:
        promise.result(timeout)
    except TimeoutError:
        return False
    return True


def _when(r: ScheduleRow) -> str:
    return f"cron {r.cron} {r.timezone}" if r.cron is not None else f"every {r.every:g}s"


def schedule_rows(store: Any) -> list[dict[str, Any]]:
    """The schedules as the web view lists them (times as ISO 8601 UTC text)."""
    return [
        {
            "id": r.id,
            "workflow": r.workflow,
            "when": _when(r),
            "next_tick": tick_text(r.next_tick) if r.next_tick is not None else "-",
            "last_started": r.last_started,
            "overlap": r.overlap,
            "catchup": r.catchup,
        }
        for r in stored.schedules(store)
    ]


def print_schedules(store: Any, *, as_json: bool) -> int:
    """``wf schedules``: every schedule of the database, with its next tick and its last run."""
    rows = stored.schedules(store)
    if as_json:
        print(
            json.dumps(
                [
                    {
                        "id": r.id,
                        "workflow": r.workflow,
                        "cron": r.cron,
                        "every": r.every,
                        "timezone": r.timezone,
                        "overlap": r.overlap,
                        "catchup": r.catchup,
                        "next_tick": r.next_tick,
                        "last_started": r.last_started,
                    }
                    for r in rows
                ],
                indent=2,
            )
        )
        return 0
    if not rows:
        print("no schedules (system.schedule(id, wf, cron=... or every=...) makes one)")
        return 0
    table = [("ID", "WORKFLOW", "WHEN", "NEXT TICK", "LAST STARTED")]
    for r in rows:
        when = f"cron {r.cron} {r.timezone}" if r.cron is not None else f"every {r.every:g}s"
        table.append(
            (
                r.id,
                r.workflow,
                when,
                tick_text(r.next_tick) if r.next_tick is not None else "-",
                r.last_started or "-",
            )
        )
    widths = [max(len(row[i]) for row in table) for i in range(4)]
    for row in table:
        print("  ".join(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)) + "  " + row[4])
    return 0
