"""``ActorSystem``: the embedded runtime on one SQLite file, or as one node of a cluster on PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Generic, ParamSpec, TypeVar, cast, overload

from persistence import (
    CANCEL,
    FINISHED,
    RUNNING,
    SIGNAL,
    Delivered,
    Dropped,
    ExternalRow,
    InboxFull,
    NewWorkflow,
    PersistenceError,
    ProcedureRow,
    Promise,
    StepAck,
    StepWrite,
    StorageUnavailable,
    Store,
    TimerRow,
    UnknownWorkflowId,
    WorkflowFinished,
    WorkflowRecord,
    dumps,
    loads,
    open_store,
)
from persistence._log import SystemLog
from persistence._urls import display_url
from workflows import Cancelled, Status, WorkflowFailed, WorkflowFunction
from workflows._compiler import checkpoint
from workflows._errors import CheckpointError, check_text

from . import _history, _serve, _talk, _tombstones
from ._activator import Activator
from ._actor import (
    DirectSignal,
    Escalate,
    EscalationFailed,
    FireTimer,
    Kick,
    TimerFired,
    Wake,
    WorkflowActor,
    filter_key,
)
from ._aio import AsyncBridge
from ._clock import AnchoredClock, Clock, SystemClock
from ._errors import SystemClosed, TimerNotArmed, UnknownWorkflow, WorkflowNotRunning
from ._history import HistoryEntry
from ._host import Host
from ._later import Later
from ._metrics import Metrics, registry_for
from ._outcomes import Outcome, Outcomes
from ._pool import Dispatcher
from ._procedures import ProcedureExecutor
from ._retention import Retention, check_seconds
from ._schedules import ScheduleInfo, Schedules
from ._timers import TimerService
from ._work import WorkCounter
from ._writes import new_workflow_record

R = TypeVar("R")
A1 = TypeVar("A1")
A2 = TypeVar("A2")
A3 = TypeVar("A3")
A4 = TypeVar("A4")
A5 = TypeVar("A5")
A6 = TypeVar("A6")
P = ParamSpec("P")

RESTART_INTENSITY = 5  # restarts ...
RESTART_PERIOD = 60.0  # ... within this many seconds, then the workflow fails (OTP's MaxR/MaxT)
# A workflow whose write failed for a reason of the storage is tried again after this many seconds,
# doubling at each failure up to the maximum (with jitter), for as long as the episode lasts.
STORAGE_BACKOFF = 0.02
STORAGE_BACKOFF_MAX = 2.0


@dataclass(frozen=True)
class NodeInfo:
    """A live node of a cluster (``system.nodes()``): its name, how many shards it leases, how
    old its last heartbeat is (seconds, by the database's clock) and when it joined (epoch
    seconds)."""

    node_id: str
    shards: int
    heartbeat_age: float
    started_at: float
    state: str = "up"  # or "stale": its heartbeat is older than its lease (frozen, or killed alone)


@dataclass(frozen=True)
class WorkflowInfo:
    """A snapshot of one workflow, as ``system.workflows()`` and ``ref.info()`` return it."""

    id: str
    type: str
    status: Status
    parent_id: str | None
    waiting_on: str | None
    created_at: float
    updated_at: float
    result: Any
    error: dict[str, Any] | None
    test_mode: bool
    scheduled_at: float | None = None  # the tick (epoch seconds) of a workflow a schedule started
    # What the workflow published (``publish(key, value)``): the last value of each key.
    published: dict[str, Any] = field(default_factory=dict)


def _waiting_text(waiting_on: str | None) -> str | None:
    if not waiting_on:
        return None
    try:
        w = json.loads(waiting_on)
    except ValueError:
        return waiting_on
    parts = []
    for a in w.get("arms", []):
        if a["kind"] == "timer":
            parts.append(f"timer {a['name']!r} due {time.strftime('%Y-%m-%d %H:%M:%S', time.gmtime(a['due_at']))}Z")
        elif a["kind"] == "signal":
            parts.append(f"signal {a['name']!r}")
        elif a["kind"] == "request":
            parts.append(f"ask {a['name']!r}")
        elif a["kind"] == "procedure":
            parts.append(f"procedure {a['function']}")
        else:
            parts.append(f"child {a['workflow_id']} ({a['type']})")
    text = (" or " if w.get("mode") == "select" else " and ").join(parts)
    if w.get("at"):
        text += f" at {w['at']}"
    if w.get("blocked"):
        text = f"BLOCKED ({w['blocked']}); was waiting on {text or 'nothing'}"
    return text


def info_from_record(rec: WorkflowRecord, published: dict[str, Any] | None = None) -> WorkflowInfo:
    result = None
    if rec.result is not None:
        try:
            result = loads(rec.result)
        except Exception as e:  # a result whose class is gone: show what happened instead
            result = f"<result cannot be loaded: {e}>"
    return WorkflowInfo(
        id=rec.id,
        type=rec.type,
        status=Status(rec.status),
        parent_id=rec.parent_id,
        waiting_on=_waiting_text(rec.waiting_on) if rec.status == RUNNING else None,
        created_at=rec.created_at,
        updated_at=rec.updated_at,
        result=result,
        error=json.loads(rec.error) if rec.error else None,
        test_mode=rec.test_mode,
        published=published if published is not None else {},
    )


class Runtime:
    """What the actors share: the store, the clock, the services, supervision."""

    commit_timeout = 60.0

    def __init__(self, store: Store, clock: Clock, procedure_workers: int, max_live: int, passivate_after: float,
                 system_log: SystemLog, actor_threads: int = 16) -> None:
        # The system's context, bound once (``SystemLog``): each service gets its part's logger.
        self.system_log = system_log
        self.log = system_log.part("system")
        self.workflow_log = system_log.part("workflow")
        self.store = store
        self.clock = clock
        self.passivate_after = passivate_after
        self.work = WorkCounter()
        # A step waiting for its commit frees its thread (the actor pauses), but loading a
        # workflow's state and the rarer writes still block one: more threads than cores.
        self.dispatcher = Dispatcher(min(actor_threads, max_live))
        host: Host = self  # what the actors see of the runtime
        # A cluster's node (PostgreSQL): the shards it leases say which workflows run here.
        self.cluster = store.cluster()
        self.fenced_steps = 0  # steps refused by the fence (their shard had moved to another node)
        self.activator = Activator(lambda wid: WorkflowActor.start(host, wid), max_live, self.work)
        self.timers = TimerService(clock, store.timers_due, self._fire_timer, self.work,
                                   log=system_log.part("timers"))
        self.procedures = ProcedureExecutor(
            store, clock, procedure_workers, self.activator.deliver, self.timers.call_at, self.work,
            log=system_log.part("procedures"),
        )
        # result() callers waiting for a workflow to finish, woken by the step that finishes it.
        self._finish_waiters: dict[str, list[Promise[None]]] = {}
        self.outcomes = Outcomes(self.cluster)  # how the workflows that ended here ended
        self._finish_lock = threading.Lock()
        self._restarts: dict[str, deque[float]] = {}
        self._restart_lock = threading.Lock()
        self.later = Later(self.work, log=self.log)
        self.metrics: Metrics | None = None  # set by the system when it counts (``metrics=``)
        self.shards_taken = 0
        # A storage episode (writes failing for a reason of the storage): when it began, how many
        # writes failed, and each waiting workflow's count of attempts (its backoff).
        self._storage_since: float | None = None
        self._storage_faults = 0
        self._storage_attempts: dict[str, int] = {}
        self._storage_kicks: set[str] = set()  # waiting to try a step again (not an escalation)

    def owns(self, workflow_id: str) -> bool:
        """True if this node runs ``workflow_id`` (always, but on a cluster's node)."""
        return self.store.owns(workflow_id)

    # -- called by the cluster (its own thread) --------------------------------------------------
    def shards_gained(self, shards: set[int]) -> None:
        """Leases taken: recover what these shards hold (due timers, pending procedures under
        their keys, workflows with work), as at the opening of a system."""
        assert self.cluster is not None
        self.work.inc()
        try:
            self.shards_taken += len(shards)
            work = self.cluster.recovery_work(shards)
            self.timers.refill()
            for row in work.procedures:
                if row.workflow_id not in work.cancelling:
                    self.procedures.dispatch(row, recovered=True)
            for wid in work.with_work:
                self.activator.deliver(wid, Kick(reload=True))
            self.log.info("shards_gained", count=len(shards), owned=len(self.cluster.owned_shards()),
                     activated=len(work.with_work), procedures=len(work.procedures))
        finally:
            self.work.dec()

    def shards_lost(self, shards: set[int]) -> None:
        """Leases gone (handed off, or taken by another node): writes for them are refused from
        now on; their idle actors stop (a busy one stops when its commit is refused)."""
        n = self.activator.passivate_where(lambda wid: not self.owns(wid))
        self.log.info("shards_lost", count=len(shards), owned=len(self.cluster.owned_shards()) if self.cluster else 0,
                 passivated=n)

    def woken(self, workflow_ids: list[str]) -> None:
        """Another node left these workflows a message (or a start): they read their inbox."""
        for wid in workflow_ids:
            if self.owns(wid):
                self.activator.deliver(wid, Wake(None))

    def finished_elsewhere(self, workflow_ids: list[str]) -> None:
        for wid in workflow_ids:
            self._finish_wake(wid)

    # -- called by actors ------------------------------------------------------------------------
    def _fire_timer(self, row: TimerRow) -> None:
        if self.metrics is not None:
            self.metrics.timer_fired(self.clock.now() - row.due_at)
        if self.owns(row.workflow_id):  # else its shard moved: the new owner fires it
            self.activator.deliver(row.workflow_id, TimerFired(row))

    def fenced(self, workflow_id: str, error: BaseException) -> None:
        """A step of ``workflow_id`` was refused by the fence: its shard is another node's now,
        which goes on from the last committed step. Nothing was written; the actor stops (and
        a new one goes on here if the shard has become this node's meanwhile)."""
        with self._restart_lock:
            self.fenced_steps += 1
            self._restarts.pop(workflow_id, None)
        self.log.warning("step_fenced", workflow_id=workflow_id, error=str(error))
        self.activator.passivate_where(lambda wid: wid == workflow_id)
        if getattr(error, "epoch", 0) is None and self.owns(workflow_id):
            # Refused as this node held no lease of its shard, which has become this node's
            # since: the takeover's recovery may have looked before what the refusal left was
            # committed (a start's record, written alone, leaves no wake-up in a shard its
            # writer leases). Go on here. (A lease lost without knowing it, refused by the
            # database at the epoch it held, is not tried again before the next round.)
            self.activator.deliver(workflow_id, Kick(reload=True))

    def carry_out(
        self,
        workflow_id: str,
        sw: StepWrite,
        ack: StepAck,
        timers: list[TimerRow],
        test_mode: bool,
        seeds: dict[str, Any] | None = None,
    ) -> None:
        """Carry out what a committed step asked for: only now may anything leave the actor."""
        if sw.published or sw.replies:
            self.news(workflow_id)
        if sw.cancel_timers:
            self.timers.cancel(sw.cancel_timers)
        if timers and not test_mode:
            self.timers.arm(timers)
        for p in sw.new_procedures:
            self.procedures.dispatch(ProcedureRow(p.key, workflow_id, p.function, p.args, "pending", 1, None, None, 0.0))
        if ack.created:
            types = {w.id: w.type for w in sw.new_workflows}
            spread = {w.id for w in sw.new_workflows if w.spread}
            remote = False
            if self.metrics is not None:
                for child in ack.created:
                    self.metrics.workflow_started(types.get(child))
            for child in ack.created:
                self.log.info("workflow_started", workflow_id=child, workflow_type=types.get(child), parent_id=workflow_id)
                if self.cluster is not None and child not in spread:
                    self.cluster.note_child(child, workflow_id)  # in its parent's shard
                if self.owns(child):
                    self.activator.deliver(child, Kick(seeds.get(child) if seeds else None))
                else:
                    remote = True  # spread to another node's shard: its owner starts it
            if remote and self.cluster is not None:
                self.cluster.publish_wake()
        self.wake(ack.delivered)
        for wid, why in ack.dropped:
            # A message to a workflow that has just ended (a child's parent, a cancelled child) is
            # expected; an unknown target or a full inbox is a mistake worth a warning.
            level = self.log.debug if why.expected else self.log.warning
            level("signal_dropped", workflow_id=workflow_id, target=wid, reason=str(why))

    def after_commit(self, written: Promise[R], then: Callable[[Promise[R]], None]) -> None:
        """Run ``then(written)`` once ``written`` settles (on the writer's thread, as a rule),
        counted as work until it has run: the writer wakes the caller before it runs the
        callbacks, so the caller, and ``idle()`` after it, could otherwise go on before the
        workflows the write concerns are woken."""
        work = self.work
        work.inc()

        def run(p: Promise[R]) -> None:
            try:
                then(p)
            finally:
                work.dec()

        written.add_done_callback(run)

    def wake(self, delivered: Iterable[Delivered]) -> None:
        """Hand each new inbox row to its workflow's actor (the row itself: a parent woken by a
        hundred children must not read its inbox back a hundred times). A row for a workflow this
        store does not own is its backend's to announce to the owner."""
        remote = False
        unknown: list[Delivered] = []
        cluster = self.cluster
        for d in delivered:
            owned = self.store.owns(d.workflow_id) if cluster is None else cluster.owns_cached(d.workflow_id)
            if owned is None:
                unknown.append(d)  # its shard must be read: not on this (the writer's) thread
            elif owned:
                self.activator.deliver(d.workflow_id, Wake(d.row()))
            else:
                remote = True
        if remote and cluster is not None:
            # The commit left a wake-up row for the owner: tell it (after the commit, never in it).
            cluster.publish_wake()
        if unknown:
            self.later.call_later(0.0, lambda: self.wake_read(unknown))

    def wake_read(self, delivered: list[Delivered]) -> None:
        """``wake`` for rows whose workflows' shards this node has not read yet."""
        remote = False
        for d in delivered:
            if self.owns(d.workflow_id):
                self.activator.deliver(d.workflow_id, Wake(d.row()))
            else:
                remote = True
        if remote and self.cluster is not None:
            self.cluster.publish_wake()

    def message_done(self, workflow_id: str) -> None:
        self.activator.done(workflow_id)

    def forget_pruned(self, workflow_ids: list[str]) -> None:
        """Workflows just deleted by retention: wake whoever waits on their result (it reads them
        gone), forget their restart history. (A live actor still holding one of them reloads when
        a new workflow takes its id: its Kick carries a seed.)"""
        self.outcomes.forget(workflow_ids)
        for wid in workflow_ids:
            self._finish_wake(wid)
            with self._restart_lock:
                self._restarts.pop(wid, None)

    def finished(self, workflow_id: str, outcome: Outcome) -> None:
        """A step of this node finished ``workflow_id``: wake ``result()`` here and on the others."""
        self.outcomes.remember(workflow_id, outcome)
        self._finish_wake(workflow_id)
        if self.cluster is not None:
            self.cluster.publish_done([workflow_id])

    def news(self, workflow_id: str) -> None:
        """A step of this node published or replied: wake whoever waits on ``workflow_id``
        (``ref.published``, ``ref.ask``) here, and tell the nodes that said they wait on it."""
        self._finish_wake(workflow_id)
        if self.cluster is not None:
            self.cluster.publish_news([workflow_id])

    def _finish_wake(self, workflow_id: str) -> None:
        with self._finish_lock:
            waiters = self._finish_waiters.pop(workflow_id, ())
        for w in waiters:
            if not w.done():
                w.set_result(None)

    def await_finish(self, workflow_id: str) -> Promise[None]:
        """A promise set when ``workflow_id`` finishes (register it before reading its status):
        by a step here, or, on a cluster, by another node's notice, which the node running it
        sends once told that this one waits."""
        p: Promise[None] = Promise()
        with self._finish_lock:
            self._finish_waiters.setdefault(workflow_id, []).append(p)
        if self.cluster is not None and self.cluster.owns_cached(workflow_id) is not True:
            self.cluster.publish_interest(workflow_id)
        return p

    def forget_finish(self, workflow_id: str, p: Promise[None]) -> None:
        with self._finish_lock:
            ws = self._finish_waiters.get(workflow_id)
            if ws is not None:
                with contextlib.suppress(ValueError):
                    ws.remove(p)
                if not ws:
                    del self._finish_waiters[workflow_id]

    def fault(self, workflow_id: str, error: BaseException, workflow_type: str | None = None) -> None:
        """A runtime fault in an actor: restart it from its last checkpoint, with backoff."""
        now = time.monotonic()
        with self._restart_lock:
            hist = self._restarts.setdefault(workflow_id, deque())
            while hist and hist[0] < now - RESTART_PERIOD:
                hist.popleft()
            hist.append(now)
            n = len(hist)
        if n > RESTART_INTENSITY:
            if isinstance(error, EscalationFailed):
                self.log.error("workflow_escalation_failed", workflow_id=workflow_id, error=repr(error.__cause__))
                return
            self.log.error("workflow_restart_intensity_exceeded", workflow_id=workflow_id, workflow_type=workflow_type,
                      restarts=n - 1, error=repr(error))
            # Through the actor's own mailbox, so no step of it can race the final write.
            message = f"runtime fault after {RESTART_INTENSITY} restarts in {RESTART_PERIOD:.0f}s"
            self.activator.deliver(workflow_id, Escalate(error, message))
            return
        delay = min(0.01 * (2 ** (n - 1)), 1.0) * (0.5 + random.random() / 2)
        self.log.warning("actor_restarted", workflow_id=workflow_id, workflow_type=workflow_type, attempt=n,
                    backoff=round(delay, 4), error=repr(error))
        self.later.call_later(delay, lambda: self.activator.deliver(workflow_id, Kick()))

    def storage_fault(self, workflow_id: str, error: BaseException, retry: Any) -> None:
        """A write failed for a reason of the storage: try the workflow again after a backoff.

        Not counted in the restart intensity, and logged once per episode (``storage_unavailable``
        at its first failed write, ``storage_recovered`` at the first write that commits after).
        """
        cause: BaseException | None = error
        while cause is not None and not isinstance(cause, StorageUnavailable):
            cause = cause.__cause__
        if self.metrics is not None:
            self.metrics.count("storage_faults")
        with self._restart_lock:
            first = self._storage_since is None
            if first:
                self._storage_since = time.monotonic()
            self._storage_faults += 1
            n = self._storage_attempts.get(workflow_id, 0) + 1
            self._storage_attempts[workflow_id] = n
            if isinstance(retry, Kick):
                self._storage_kicks.add(workflow_id)
        if first:
            self.log.warning("storage_unavailable", workflow_id=workflow_id, error=str(cause or error),
                        retrying="with backoff, until a write commits")
        delay = min(STORAGE_BACKOFF * (2 ** (n - 1)), STORAGE_BACKOFF_MAX) * (0.5 + random.random() / 2)
        self.later.call_later(delay, lambda: self.activator.deliver(workflow_id, retry))

    def storage_ok(self, workflow_id: str) -> None:
        if self._storage_since is None and not self._storage_attempts:
            return
        with self._restart_lock:
            self._storage_attempts.pop(workflow_id, None)
            since, self._storage_since = self._storage_since, None
            faults, self._storage_faults = self._storage_faults, 0
            # The others waiting out their backoff go on now, not up to STORAGE_BACKOFF_MAX
            # later each (timer workflows ran behind after a full disk was freed). Their
            # scheduled retry still comes: a second look at no work.
            waiting: set[str] = set()
            if since is not None:
                waiting, self._storage_kicks = self._storage_kicks - {workflow_id}, set()
            self._storage_kicks.discard(workflow_id)
        if since is not None:
            self.log.warning("storage_recovered", failed_writes=faults, seconds=round(time.monotonic() - since, 3))
        for wid in waiting:
            self.activator.deliver(wid, Kick())

# The first and the longest wait before kept `wf` requests are tried again (seconds).
_EXTERNAL_BACKOFF = (0.05, 2.0)
# Errors of a request itself: it can never be carried out, so it is deleted (and logged).
_REQUEST_ERRORS = (UnknownWorkflowId, WorkflowFinished, UnknownWorkflow, WorkflowNotRunning,
                   TimerNotArmed, ValueError)
# A pass left a fire-timer request to the step that takes its timer: look again soon.
_PENDING_STEP = Exception("a fire-timer request waits for its step")



class WorkflowRef(Generic[R]):
    """A handle on one workflow. Made by the runtime (``system.start``/``system.get``).

    Generic in the workflow's return type: ``system.start(wf, ...)`` gives a ``WorkflowRef[R]``
    whose ``result()`` is ``R``; ``system.get(id)`` a ``WorkflowRef[Any]``.
    """

    def __init__(self, system: ActorSystem, workflow_id: str, *, _token: object = None) -> None:
        if _token is not _REF_TOKEN:
            raise TypeError(
                "WorkflowRef is made by the runtime: use system.start(...) or system.get(id)"
            )
        self._system = system
        self.id = workflow_id

    def __repr__(self) -> str:
        return f"<WorkflowRef {self.id!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WorkflowRef) and other.id == self.id and other._system is self._system

    def __hash__(self) -> int:
        return hash(self.id)

    def signal(self, name: str, payload: Any = None) -> None:
        """Send signal ``name``; returns once it is durable."""
        self._system._append(self.id, SIGNAL, name, payload, "signal")

    def debug_send_signal(self, name: str, payload: Any = None) -> None:
        """Deliver a signal directly to this workflow (test mode; bypasses subscription filters)."""
        self._system._append(self.id, SIGNAL, name, payload, "signal")

    def cancel(self, reason: str | None = None) -> None:
        """Raise ``Cancelled`` at the workflow's current await; ``finally`` blocks run."""
        self._system._append(self.id, CANCEL, "cancel", reason, "cancel")

    async def signal_async(self, name: str, payload: Any = None) -> None:
        """``signal`` for asyncio code: returns once the signal is durable, without blocking the loop.

        The send waits for its commit (and may run the step that consumes the signal), so it runs
        on the system's own executor (at most ``ASYNC_WORKERS`` threads), never on the loop's.
        """
        await self._system._aio.run(self._system._closed_error, self.signal, name, payload)

    async def cancel_async(self, reason: str | None = None) -> None:
        """``cancel`` for asyncio code: returns once the request is durable, without blocking the loop.

        The write waits for its commit, so it runs on the system's own executor (at most
        ``ASYNC_WORKERS`` threads), never on the loop's.
        """
        await self._system._aio.run(self._system._closed_error, self.cancel, reason)

    def debug_fire_timer(self, name: str, timeout: float = 30.0) -> None:
        """Fire the armed timer ``name`` now; an unknown name raises ``TimerNotArmed``."""
        sysm = self._system
        sysm._check_open()
        rec = sysm._rt.store.load_workflow(self.id)
        if rec is None:
            raise sysm._unknown(self.id)
        if rec.status != RUNNING:
            raise WorkflowNotRunning(self.id, rec.status, f"fire timer {name!r}")
        sysm._fire_timer(self.id, name, timeout)

    def status(self) -> Status:
        return Status(self._record().status)

    def info(self) -> WorkflowInfo:
        rec = self._record()
        info = info_from_record(rec, _talk.published_values(self._system, [rec.id]).get(rec.id, {}))
        return self._system._schedules.with_ticks([info])[0]

    def history(self, limit: int | None = None, before: int | None = None) -> list[HistoryEntry]:
        """The workflow's history, oldest first: every step (what woke it, what it armed,
        published, sent or replied) and how it ended, kept until the workflow is pruned (the
        newest ``history_limit`` steps if the system was given one).

        Paged: the newest ``limit`` entries (all if None) before position ``before`` (an entry's
        ``position``; None: up to the newest). ``history(limit=50)`` is the last page;
        ``history(limit=50, before=page[0].position)`` the one before it.
        """
        self._record()  # UnknownWorkflow, as the other calls
        rows = self._system._rt.store.history(self.id, limit=_ALL)
        return _history.page(rows, limit, before)

    def published(self, key: str, timeout: float | None = None) -> Any:
        """The value the workflow last published under ``key`` (``publish(key, value)``), read
        from the store: also while it is passivated, after it ended, or on another node.

        ``timeout`` None: do not wait (``KeyError`` if nothing was published under ``key``);
        otherwise wait up to ``timeout`` seconds for a first value (``TimeoutError``), woken by
        the commit that publishes it. ``Any``: what a workflow publishes is not known statically.
        """
        return _talk.published(self._system, self.id, key, timeout)

    async def published_async(self, key: str, timeout: float | None = None) -> Any:
        """``published`` for asyncio code: no thread waits; the reads run on the executor."""
        return await _talk.published_async(self._system, self.id, key, timeout)

    def ask(self, name: str, payload: Any = None, timeout: float | None = None,
            ask_id: str | None = None) -> Any:
        """Ask the workflow ``name`` with ``payload`` (its ``await request(name)`` gets a
        ``Request``) and return what it replies (``Any``: not known statically).

        The request is durable before this waits. Raises ``AskFailed`` (carrying the error the
        workflow replied with ``reply(req, error=exc)``), ``WorkflowNotRunning`` (the workflow
        had ended, or ended without replying), ``TimeoutError`` after ``timeout`` seconds (the
        request stays: ask again with the same ``ask_id`` to go on waiting). Asked again with the
        ``ask_id`` of an earlier ask (after a crash), it returns that ask's reply and asks
        nothing new.
        """
        return _talk.ask(self._system, self.id, name, payload, timeout, ask_id)

    async def ask_async(self, name: str, payload: Any = None, timeout: float | None = None,
                        ask_id: str | None = None) -> Any:
        """``ask`` for asyncio code: no thread waits for the reply."""
        return await _talk.ask_async(self._system, self.id, name, payload, timeout, ask_id)

    def result(self, timeout: float | None = None) -> R:
        """The return value; raises ``WorkflowFailed``, ``Cancelled`` or ``TimeoutError``."""
        rt = self._system._rt
        deadline = None if timeout is None else time.monotonic() + timeout
        first = True
        while True:
            self._system._check_open()
            ended = rt.outcomes.get(self.id)  # it finished here: no read
            if ended is not None:
                return self._outcome(ended)
            # Registered before the read, so a finish between the two still wakes us.
            woken = rt.await_finish(self.id)
            try:
                if first and (deadline is None or deadline > time.monotonic()) and rt.outcomes.running(self.id):
                    # Started here and not ended since: no read to learn that it runs. (The
                    # reads of the next rounds are there for an end this process missed.)
                    first = False
                    with contextlib.suppress(TimeoutError):
                        woken.result(0.5 if deadline is None else min(deadline - time.monotonic(), 0.5))
                    continue
                first = False
                rec = self._record()
                if rec.status in FINISHED:
                    break
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    raise self._not_finished(timeout, rec)
                # The half-second bound rereads the status even if no wake-up comes (a finish
                # made by another process, or while this system was closing).
                with contextlib.suppress(TimeoutError):
                    woken.result(0.5 if remaining is None else min(remaining, 0.5))
            finally:
                rt.forget_finish(self.id, woken)
        return self._outcome(rec)

    async def result_async(self, timeout: float | None = None) -> R:
        """``result`` for asyncio code: the return value, awaited without blocking the loop.

        No thread waits for the workflow: the step that finishes it completes an asyncio future
        on this loop (``call_soon_threadsafe``), so any number of these may be pending at once.
        Only the short reads of the workflow's row run on the system's executor. The row is read
        again now and then even without a wake-up (after 0.5 s, doubling up to 5 s), and at once
        when the system shuts down (``SystemClosed``). Raises as ``result`` does.
        """
        sysm = self._system
        sysm._check_open()
        rt = sysm._rt
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        recheck = 0.5
        while True:
            ended = rt.outcomes.get(self.id)  # it finished here: no read
            if ended is not None:
                return self._outcome(ended)
            woken, wake = sysm._aio.waiter()
            finish = rt.await_finish(self.id)  # registered before the read, as in result()
            finish.add_done_callback(wake)
            try:
                rec = await sysm._aio.run(sysm._closed_error, self._record)
                if rec.status in FINISHED:
                    break
                remaining = None if deadline is None else deadline - loop.time()
                if remaining is not None and remaining <= 0:
                    raise self._not_finished(timeout, rec)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken, recheck if remaining is None else min(remaining, recheck))
                recheck = min(recheck * 2, 5.0)
            finally:
                rt.forget_finish(self.id, finish)
                woken.cancel()
        return self._outcome(rec)

    def _not_finished(self, timeout: float | None, rec: WorkflowRecord) -> TimeoutError:
        return TimeoutError(
            f"workflow {self.id!r} did not finish within {timeout}s "
            f"(status {rec.status}, waiting on {_waiting_text(rec.waiting_on)})"
        )

    def _outcome(self, rec: WorkflowRecord | Outcome) -> R:
        """The result of a finished workflow's record, or the error it ended with, raised."""
        if rec.status == "completed":
            # What this workflow returned (its R), or None when it returned nothing.
            return cast(R, loads(rec.result) if rec.result is not None else None)
        err = json.loads(rec.error or "{}")
        if rec.status == "cancelled":
            raise Cancelled(err.get("message") or None)
        raise WorkflowFailed(
            f"workflow {self.id!r} failed: {err.get('type')}: {err.get('message')}",
            workflow_id=self.id,
            error_type=err.get("type"),
            error_message=err.get("message"),
            traceback=err.get("traceback"),
        )

    def _record(self) -> WorkflowRecord:
        self._system._check_open()  # SystemClosed, as documented, not the store's own error
        rec = self._system._rt.store.load_workflow(self.id)
        if rec is None:
            raise self._system._unknown(self.id)
        return rec


_REF_TOKEN = object()
_ALL = 2**62  # a history read with no limit
_IDLE_POLL = 0.005  # seconds between the checks of idle_async


def _id_bits() -> str:
    """48 random bits as twelve hex digits (what the first twelve of a uuid4's are, without
    building a UUID object per start)."""
    return os.urandom(6).hex()


def _new_id(wf: Any) -> str:
    return f"{wf.__name__}-{_id_bits()}"


def _seed(wf: Any, key: str, wid: str, args: tuple[Any, ...], test_mode: bool, now: float) -> tuple[NewWorkflow, Any, bytes]:
    """A new top-level workflow's record, with the continuation and checkpoint it was made from."""
    cont = wf.start(*args)
    try:
        blob = checkpoint(cont)
    except CheckpointError as e:
        # Nothing of the workflow has run: what cannot be pickled is an argument of the start.
        raise CheckpointError(
            f"cannot start workflow {key}: its argument {e.variable!r} ({e.value_type}) cannot be "
            f"pickled, and a workflow's arguments are part of its durable state. Pass plain "
            f"picklable data (an id, a dataclass of values), and open files, locks or "
            f"connections inside a procedure.",
            variable=e.variable, value_type=e.value_type, location=None,
        ) from e
    return new_workflow_record(wid, key, blob, cont.fingerprint, created_at=now, test_mode=test_mode), cont, blob


class ActorSystem:
    """An embedded workflow runtime on one SQLite file, or one node of a cluster on a
    ``postgresql://`` URL.

    Opening it recovers every unfinished workflow in the file: timers that fell due while the
    process was down fire at once, pending procedures run again with the same idempotency key,
    buffered signals are delivered.
    """


    def __init__(
        self,
        db: str = "workflows.db",
        *,
        clock: Clock | None = None,
        procedure_workers: int = 8,
        passivate_after: float = 60.0,
        max_live: int = 1_000,
        durability: str = "normal",
        inbox_limit: int = 10_000,
        retention: float | None = 7 * 86400,
        node_id: str | None = None,
        node_ttl: float = 10.0,
        history_limit: int | None = None,
        id_retention: float | None = 30 * 86400,
        metrics: Any = None,
        _local_time: Callable[[], float] | None = None,
    ) -> None:
        self.db = db
        # Checked before anything opens: a missing prometheus_client says what to install.
        registry = registry_for(metrics)
        # The newest steps of each workflow its history keeps (None: every step, SPEC §10).
        self.history_limit = _history.check_limit(history_limit)
        # Seconds a pruned workflow's id stays taken (its tombstone); None: for good.
        self.id_retention = check_seconds(id_retention, "id_retention", allow_none=True)
        if node_id is not None and (not isinstance(node_id, str) or not node_id.strip()):
            raise TypeError(f"node_id must be a non-empty string, got {node_id!r}")
        # This process's name in a cluster (SPEC §9): host name and process id unless given.
        self.node_id = node_id if node_id is not None else f"{socket.gethostname()}-{os.getpid()}"
        check_text(self.node_id, "node_id")
        ttl = check_seconds(node_ttl, "node_ttl", allow_none=False)
        assert ttl is not None
        self._started_at = time.time()
        self._closed = False
        # Seconds a finished workflow is kept (then deleted, see ``_retention``); None: forever.
        self.retention = check_seconds(retention, "retention", allow_none=True)
        self._aio = AsyncBridge()
        self._stop = threading.Event()
        # Requests of the `wf` CLI waiting for room in their workflow's inbox (retried).
        self._external_waiting: set[int] = set()
        # Requests kept after a storage fault (disk full, I/O error), retried from this time on
        # (monotonic; None: none is kept), with the backoff of the next retry.
        self._external_retry_at: float | None = None
        self._external_backoff = _EXTERNAL_BACKOFF[0]
        # What every event of this system says of it, bound once and handed to each part it
        # makes: the database it runs on, and on PostgreSQL (a cluster) its node's name and the
        # shards the node holds, whatever thread logs the event.
        is_url = isinstance(db, str) and db.startswith(("postgresql://", "postgres://"))
        system_log = SystemLog(display_url(db) if is_url else os.fspath(db), self.node_id if is_url else None)
        self._log = system_log.part("system")
        store = open_store(db, durability=durability, owner=True, inbox_limit=inbox_limit,
                           node_id=self.node_id, node_ttl=ttl, local_time=_local_time, _log=system_log)
        store.keep_history(self.history_limit)
        cluster = store.cluster()
        if cluster is None:
            system_log.node_id = None  # (a store that is no cluster's node: no node to name)
        else:
            system_log.shards = lambda: len(cluster.owned_shards())
        if clock is None:
            # A cluster's timers fire by the database's clock, so that a node whose own clock is
            # off never fires one early (or late) by the others' reckoning.
            clock = AnchoredClock(cluster.clock_offset, _local_time) if cluster is not None else SystemClock()
        self.clock = clock
        rt: Runtime | None = None
        try:
            self._rt = rt = Runtime(store, self.clock, procedure_workers, max_live, passivate_after, system_log)
            if registry is not None:
                rt.metrics = rt.procedures.metrics = rt.procedures.limits.metrics = Metrics(registry, rt)
            self._retention = Retention(store, self.clock, self.retention, rt.forget_pruned, log=self._log,
                                        pruning=rt.outcomes.pruning, id_retention=self.id_retention)
            self._schedules = Schedules(rt, self.clock, lambda wf, key, wid, args, now: _seed(wf, key, wid, args, False, now))
            # Requests the `wf` CLI left while no system owned the file, before recovery runs
            # anything: a cancel among them lands before the procedures it disarms run again.
            self._take_external()
            self.recovered = self._recover()
            if cluster is not None:
                # Heartbeats, takeovers and wake-ups from now on, told on the cluster's thread.
                cluster.start(rt)
            self._house = threading.Thread(target=self._housekeeping, name="actorflow-house", daemon=True)
            self._house.start()
        except BaseException:
            # Nothing of a system that failed to open may outlive it: its threads stop, and the
            # file is released for the next ActorSystem of this process.
            self._closed = True
            if rt is not None:
                if rt.metrics is not None:
                    rt.metrics.close()
                for stop in (rt.later.stop, rt.timers.stop, rt.procedures.shutdown, rt.activator.close, rt.dispatcher.shutdown):
                    try:
                        stop()
                    except Exception as e:
                        self._log.warning("system_open_cleanup_failed", db=db, error=repr(e))
            store.close()
            raise

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> ActorSystem:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    def shutdown(self) -> None:
        """Stop every actor and service and release the database. Nothing durable is lost. A
        cluster's node hands its shards off to the other nodes first."""
        self._stop_system(handoff=True)

    def serve(self) -> None:
        """Block until SIGTERM or SIGINT, then shut down cleanly (a cluster's node hands its
        shards off first, and shows as ``left``); returns at once if the system is shut down
        otherwise meanwhile. Call it from the main thread, which receives the signals."""
        self._check_open()
        _serve.serve(lambda: self._closed, self.shutdown, self.db, self._log)

    def _crash(self) -> None:
        """Stop without handing anything off, as a crash would as far as the database can tell
        (the test cluster's ``crash``): the other nodes find this one dead and take over."""
        self._stop_system(handoff=False)

    def _stop_system(self, *, handoff: bool) -> None:
        if self._closed:
            return
        self._closed = True
        self._aio.close()  # wakes every result_async, lets the async calls under way finish
        self._stop.set()
        self._house.join(timeout=5)
        rt = self._rt
        rt.later.stop()
        rt.timers.stop()
        crash = getattr(rt.store, "crash", None)
        # A crash leaves the attempts counted for calls that never started as they are, as a
        # real one would.
        rt.procedures.shutdown(give_back=handoff or crash is None)
        rt.activator.close()
        rt.dispatcher.shutdown()
        if handoff or crash is None:
            rt.store.close()  # a cluster's node hands its shards off once its writes are in
        else:
            crash()
        if rt.metrics is not None:
            rt.metrics.close()
        self._log.info("system_shutdown", db=self.db)

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()

    def _closed_error(self) -> SystemClosed:
        return SystemClosed(f"the ActorSystem on {self.db!r} was shut down")

    def _recover(self) -> dict[str, int]:
        rt = self._rt
        # Counted before anything runs, so the figures describe the file as it was found.
        counts = rt.store.count_workflows()
        running = sum(c for (_t, s), c in counts.items() if s == RUNNING)
        timers = len(rt.store.timers_due(float("inf"), 1 << 30)) if running else 0
        pending = list(rt.store.procedures_to_run())
        with_work = list(rt.store.workflows_with_work())
        rt.timers.start()
        # A workflow with a cancel waiting (`wf cancel` while no system ran, or a cancel the last
        # one had not carried out) takes it first: its cancel disarms the procedures it awaits,
        # which must not run again meanwhile (one that kills the process would never let the
        # cancel land).
        cancelling = rt.store.workflows_cancelling() if pending else set()
        for row in pending:
            if row.workflow_id not in cancelling:
                rt.procedures.dispatch(row, recovered=True)
        for wid in with_work:
            rt.activator.deliver(wid, Kick())
        stats = {"running": running, "activated": len(with_work), "procedures": len(pending), "timers": timers}
        self._log.info("system_recovered", db=self.db, **stats)
        return stats

    def _housekeeping(self) -> None:
        last_passivate = time.monotonic()
        pause = 0.05
        outage: float | None = None  # since when its rounds fail on storage that may pass
        while not self._stop.wait(pause):
            pause = 0.05
            try:
                # Retention: one short batch per round, the next soon after while more is due.
                if self._leads() and self._retention.tick():
                    pause = self._retention.pace()
                self._schedules.tick(self._leads())
                if self._rt.activator.has_waiting():
                    self._rt.activator.passivate_idle(0.0)
                if time.monotonic() - last_passivate >= min(1.0, self._rt.passivate_after):
                    last_passivate = time.monotonic()
                    self._rt.activator.passivate_idle(self._rt.passivate_after)
                # A request waiting for room is tried again after a commit (only a step that
                # consumes signals, or ends the workflow, makes room): changed() sees those too.
                # One kept after a storage fault is tried again after its backoff.
                retry = self._external_retry_at
                if self._rt.store.changed() or (retry is not None and time.monotonic() >= retry):
                    self._take_external()
                if outage is not None:
                    self._log.info("housekeeping_resumed", seconds=round(time.monotonic() - outage, 3))
                    outage = None
            except StorageUnavailable as e:
                # An outage (a server away, a full disk): the next round tries again, and an
                # outage that heals is no failure for good. Said once per outage.
                if outage is None:
                    outage = time.monotonic()
                    self._log.warning("housekeeping_failed", error=str(e), retrying="every round, until storage recovers")
                pause = 0.25
                self._external_retry_at = time.monotonic()  # a request it missed: the next round
            except Exception as e:
                self._log.error("housekeeping_failed", error=repr(e))
                self._external_retry_at = time.monotonic() + 1.0

    def _leads(self) -> bool:
        """True on the node that runs what the whole database needs once (retention and `wf
        prune` requests): the holder of shard 0 on a cluster, the system itself otherwise."""
        cluster = self._rt.cluster
        return cluster is None or 0 in cluster.owned_shards()

    def _mine(self, r: ExternalRow) -> bool:
        """A `wf` request this node carries out: its workflow's (a prune: the leader's)."""
        return self._leads() if r.kind == "prune" else self._rt.owns(r.workflow_id)

    def _take_external(self) -> None:
        """Carry out the requests the `wf` CLI left in the file, in order.

        A signal or cancel is appended to the inbox in the same transaction that deletes its
        request, and a fire-timer request is deleted by the step that takes its timer, so a crash
        in between cannot carry one out twice. A request is deleted without that only when it
        cannot be carried out at all (an unknown or finished workflow, no such timer, a payload
        that is not JSON). One that finds the inbox full stays, with the requests behind it for
        the same workflow, and is tried again until the workflow has room; one that meets a
        storage fault (disk full, an I/O error) stays the same way, and is tried again with
        backoff until storage recovers.
        """
        rows = [r for r in self._rt.store.take_external(0) if self._mine(r)]
        if not rows:
            self._carry_out_external(rows)  # the bookkeeping of none: not work (``idle``)
            return
        # Counted as work from before any request's row goes until its workflow is woken (until
        # then ``idle`` sees the rows themselves, ``_external_pending``).
        self._rt.work.inc()
        try:
            self._carry_out_external(rows)
        finally:
            self._rt.work.dec()

    def _carry_out_external(self, rows: list[ExternalRow]) -> None:
        done: list[int] = []
        waiting: set[int] = set()
        held: set[str] = set()  # workflows with a request waiting: the later ones wait behind it
        stored_fault: BaseException | None = None
        for r in rows:
            if r.workflow_id in held:
                waiting.add(r.seq)
                continue
            if r.kind == "prune":
                # Carried out by retention, batch by batch; it deletes the request when done.
                self._retention.request(r.seq, r.payload)
                continue
            try:
                payload = json.loads(r.payload) if r.payload is not None else None
                if r.kind in ("signal", "cancel"):
                    kind, name = (SIGNAL, r.name or "") if r.kind == "signal" else (CANCEL, "cancel")
                    d = self._rt.store.append_inbox(
                        r.workflow_id, kind, name, dumps(payload), at=self.clock.now(), external_seq=r.seq
                    )
                    self._rt.wake([d])
                    self._log.info("external_request_done", kind=r.kind, workflow_id=r.workflow_id, name=r.name)
                    continue  # its row went with the append
                if r.kind == "ask":  # stored by its ask id: carried out again after a crash, it asks once
                    _talk.carry_out_external_ask(self, r.workflow_id, r.name or "", payload)
                    self._log.info("external_request_done", kind=r.kind, workflow_id=r.workflow_id, name=r.name)
                elif r.kind == "fire_timer":
                    self._fire_timer(r.workflow_id, r.name or "", 30.0, external_seq=r.seq)
                    self._log.info("external_request_done", kind=r.kind, workflow_id=r.workflow_id, name=r.name)
                    # Its row goes with the step that takes the timer; until then it may be read
                    # again (the actor knows it), and a step that faults leaves it to retry.
                    stored_fault = stored_fault or _PENDING_STEP
                    continue
            except InboxFull as e:
                held.add(r.workflow_id)
                waiting.add(r.seq)
                if r.seq not in self._external_waiting:  # said once, not at every retry
                    self._log.warning("external_request_waiting", kind=r.kind, workflow_id=r.workflow_id, error=str(e))
                continue
            except _REQUEST_ERRORS as e:
                # A fire-timer read again before the step that took its timer committed (that
                # step deletes it) finds the workflow past it: carried out, not failed.
                if r.kind != "fire_timer" or self._external_kept(r.seq):
                    self._log.warning("external_request_failed", kind=r.kind, workflow_id=r.workflow_id, error=str(e))
            except (PersistenceError, TimeoutError) as e:
                # A storage fault, not the request's: keep it (it was acknowledged), and the
                # requests behind it for the same workflow, for a retry.
                held.add(r.workflow_id)
                if stored_fault is None or stored_fault is _PENDING_STEP:
                    stored_fault = e
                continue
            done.append(r.seq)
        self._external_waiting = waiting
        if done:
            try:
                self._rt.store.delete_external(done)
            except PersistenceError as e:
                stored_fault = stored_fault if stored_fault not in (None, _PENDING_STEP) else e
        self._external_retry(stored_fault)

    def _external_kept(self, seq: int) -> bool:
        """True if `wf` request ``seq`` is still in the database (not yet carried out)."""
        return any(x.seq == seq for x in self._rt.store.take_external(seq - 1)[:1])

    def _external_retry(self, fault: BaseException | None) -> None:
        """Schedule the next pass over kept requests (backoff doubling up to its bound), logged
        once per episode of storage faults; or end the episode."""
        if fault is None:
            if self._external_retry_at is not None and self._external_backoff > _EXTERNAL_BACKOFF[0]:
                self._log.info("external_requests_resumed", db=self.db)
            self._external_retry_at, self._external_backoff = None, _EXTERNAL_BACKOFF[0]
            return
        if fault is not _PENDING_STEP:
            if self._external_backoff == _EXTERNAL_BACKOFF[0]:
                self._log.warning("external_requests_kept", db=self.db, error=str(fault),
                            retry="with backoff, until storage recovers")
            self._external_backoff = min(self._external_backoff * 2, _EXTERNAL_BACKOFF[1])
        self._external_retry_at = time.monotonic() + self._external_backoff

    def _fire_timer(self, workflow_id: str, name: str, timeout: float, external_seq: int | None = None) -> None:
        self._check_open()
        if isinstance(name, str):
            check_text(name, "timer name")
        rec = self._rt.store.load_workflow(workflow_id)
        if rec is None:
            raise self._unknown(workflow_id)
        if rec.status != RUNNING:
            raise WorkflowNotRunning(workflow_id, rec.status, f"fire timer {name!r}")
        if not self._rt.owns(workflow_id):
            if external_seq is None:  # (a request for another node's workflow is not taken here)
                self._fire_timer_elsewhere(workflow_id, name, timeout)
            return
        msg = FireTimer(name, external_seq=external_seq)
        self._rt.activator.deliver(workflow_id, msg)
        msg.reply.result(timeout)

    def _fire_timer_elsewhere(self, workflow_id: str, name: str, timeout: float) -> None:
        """``debug_fire_timer`` of a workflow another node runs: a request for it, as `wf
        fire-timer` posts, carried out by that node; returns once it is."""
        seq = self._rt.store.post_external("fire_timer", workflow_id, name, None, at=self.clock.now())
        deadline = time.monotonic() + timeout
        while any(r.seq == seq for r in self._rt.store.take_external(0)):
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"the node that runs workflow {workflow_id!r} did not fire its timer {name!r} "
                    f"within {timeout}s (the request stays; it fires it when it gets to it)")
            time.sleep(0.02)

    # -- API -----------------------------------------------------------------------------------
    # The overloads check the workflow's arguments for a type checker, with one overload per
    # arity up to six. (A ParamSpec cannot be used, because ``id=`` and ``test_mode=`` follow
    # ``*args``; a TypeVarTuple could, but then mypy words its errors worse.) More arguments go
    # through a ParamSpec, without the options.
    @overload
    def start(
        self, wf: WorkflowFunction[[], R], /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1], R], a1: A1, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2], R], a1: A1, a2: A2, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2, A3], R], a1: A1, a2: A2, a3: A3, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2, A3, A4], R], a1: A1, a2: A2, a3: A3, a4: A4, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2, A3, A4, A5], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2, A3, A4, A5, A6], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(self, wf: WorkflowFunction[P, R], /, *args: P.args, **kwargs: P.kwargs) -> WorkflowRef[R]: ...

    def start(  # type: ignore[misc]  # ``wf`` may also be named in ``**kwargs``
        self, wf: Any, *args: Any, id: str | None = None, test_mode: bool = False,
        reuse_id: bool = False,
    ) -> WorkflowRef[Any]:
        """Start ``wf(*args)`` durably and return its ref; an existing ``id`` starts nothing new.

        The id of a finished workflow that was pruned stays taken for ``id_retention`` seconds:
        starting it raises ``WorkflowPruned`` (naming when it ended), unless ``reuse_id=True``.
        """
        self._check_open()
        key = getattr(wf, "__workflow_key__", None)
        if key is None:
            raise TypeError(f"system.start() needs a @workflow function, got {wf!r}")
        if id is not None and (not isinstance(id, str) or not id):
            raise TypeError(f"workflow id must be a non-empty string, got {id!r}")
        if id is not None:
            check_text(id, "workflow id")
        if id is not None and self._rt.store.load_workflow(id) is not None:
            return WorkflowRef(self, id, _token=_REF_TOKEN)
        if id is not None and not reuse_id:
            _tombstones.refuse_pruned(self._rt.store, id, self.clock.now(), self.id_retention)
        cluster = self._rt.cluster
        if id is not None and cluster is not None and not cluster.owns(id):
            # Its shard is another node's: the record goes in here, its first step runs there.
            self._create([_seed(wf, key, id, args, test_mode, self.clock.now())])
            return WorkflowRef(self, id, _token=_REF_TOKEN)
        while True:
            wid = id or self._local_id(wf)
            seed = _seed(wf, key, wid, args, test_mode, self.clock.now())
            # Its first step runs in its actor and commits the record with it (one transaction);
            # this thread only waits for that.
            created: Promise[bool] = Promise()
            self._rt.activator.deliver(wid, Kick(seed, created))
            if created.result(self._rt.commit_timeout):
                self._rt.outcomes.started(wid)
                return WorkflowRef(self, wid, _token=_REF_TOKEN)
            if id is not None:
                return WorkflowRef(self, wid, _token=_REF_TOKEN)
            # A generated id already taken (48 random bits: rare, not impossible in a file that
            # keeps millions of workflows): that workflow is someone else's, so draw another.

    @overload
    async def start_async(
        self, wf: WorkflowFunction[[], R], /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1], R], a1: A1, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2], R], a1: A1, a2: A2, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2, A3], R], a1: A1, a2: A2, a3: A3, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2, A3, A4], R], a1: A1, a2: A2, a3: A3, a4: A4, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2, A3, A4, A5], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2, A3, A4, A5, A6], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> WorkflowRef[R]: ...

    async def start_async(  # type: ignore[misc]  # ``wf`` may also be named in ``**kwargs``
        self, wf: Any, *args: Any, id: str | None = None, test_mode: bool = False,
        reuse_id: bool = False,
    ) -> WorkflowRef[Any]:
        """``start`` for asyncio code: the ref, once the start is durable, without blocking the loop.

        A start runs the workflow's first step and waits for its commit, so it runs on the
        system's own executor (at most ``ASYNC_WORKERS`` threads), never on the loop's. Cancelling
        the awaiting task does not undo a start already under way. Typed as ``start``.
        """
        ref: WorkflowRef[Any] = await self._aio.run(
            self._closed_error, lambda: self.start(wf, *args, id=id, test_mode=test_mode, reuse_id=reuse_id)
        )
        return ref

    def start_many(
        self,
        wf: WorkflowFunction[..., R],
        args: list[tuple[Any, ...]],
        *,
        ids: list[str] | None = None,
        test_mode: bool = False,
        reuse_id: bool = False,
    ) -> list[WorkflowRef[R]]:
        """Start ``wf(*a)`` for each tuple in ``args``, durably, in one transaction.

        Like ``start`` for each (an existing id starts nothing new), at a fraction of the cost:
        spawning a wave of monsters or a thousand auctions is one commit.
        """
        self._check_open()
        key = getattr(wf, "__workflow_key__", None)
        if key is None:
            raise TypeError(f"system.start_many() needs a @workflow function, got {wf!r}")
        args = [tuple(a) for a in args]
        generated = ids is None
        if ids is None:
            ids = [_new_id(wf) for _ in args]
        elif len(ids) != len(args):
            raise ValueError(f"start_many() got {len(args)} argument tuples but {len(ids)} ids")
        for wid in ids:
            if not isinstance(wid, str) or not wid:
                raise TypeError(f"workflow ids must be non-empty strings, got {wid!r}")
            check_text(wid, "workflow id")
        now = self.clock.now()
        if not generated and not reuse_id:
            for wid in ids:
                _tombstones.refuse_pruned(self._rt.store, wid, now, self.id_retention)
        seeds = [_seed(wf, key, wid, a, test_mode, now) for wid, a in zip(ids, args, strict=True)]
        created = self._create(seeds)
        while generated and not all(created):
            # Generated ids already taken (see start()): draw others for those alone.
            retry = [i for i, ok in enumerate(created) if not ok]
            for i in retry:
                ids[i] = _new_id(wf)
                seeds[i] = _seed(wf, key, ids[i], args[i], test_mode, now)
            for i, ok in zip(retry, self._create([seeds[i] for i in retry]), strict=True):
                created[i] = ok
        self._log.info("workflows_started", workflow_type=key, count=sum(created), existing=len(ids) - sum(created))
        return [WorkflowRef(self, wid, _token=_REF_TOKEN) for wid in ids]

    def _local_id(self, wf: Any) -> str:
        """A new id, of a shard this node leases if it can find one (a start then runs here)."""
        cluster = self._rt.cluster
        wid = _new_id(wf)
        for _ in range(64):
            if cluster is None or cluster.owns_new(wid):
                break
            wid = _new_id(wf)
        return wid

    def _create(self, seeds: list[tuple[NewWorkflow, Any, bytes]]) -> list[bool]:
        """Insert the records of ``seeds`` in one transaction, and start those created: on the
        writer's thread, after the commit, so an interruption of this wait loses none. One whose
        shard another node leases is started by that node (the commit left it a wake-up)."""
        def kick(p: Promise[list[bool]]) -> None:
            if p.exception() is not None:
                return
            remote = False
            cluster = self._rt.cluster
            if self._rt.metrics is not None:
                for seed, ok in zip(seeds, p.result(), strict=True):
                    if ok:
                        self._rt.metrics.workflow_started(seed[0].type)
            for seed, ok in zip(seeds, p.result(), strict=True):
                # (A root workflow just created: its shard is its own id's, known unread.)
                if ok and (cluster is None or cluster.owns_new(seed[0].id)):
                    self._rt.activator.deliver(seed[0].id, Kick(seed))
                elif ok:
                    remote = True
            if remote and self._rt.cluster is not None:
                self._rt.cluster.publish_wake()

        written = self._rt.store.submit_create_workflows([s[0] for s in seeds])
        self._rt.after_commit(written, kick)
        return written.result(self._rt.commit_timeout)

    def get(self, workflow_id: str) -> WorkflowRef[Any]:
        """A ref to an existing workflow; an unknown id raises ``UnknownWorkflow``."""
        self._check_open()
        if isinstance(workflow_id, str):
            check_text(workflow_id, "workflow id")
        if self._rt.store.load_workflow(workflow_id) is None:
            raise self._unknown(workflow_id)
        return WorkflowRef(self, workflow_id, _token=_REF_TOKEN)

    def prune(self, older_than: float) -> int:
        """Delete now every workflow that finished more than ``older_than`` seconds ago (on the
        system's clock), with every row it left; return how many.

        Deletes in short batches, each one write among the running workflows' steps, so they go
        on meanwhile. Running workflows are never touched.
        """
        self._check_open()
        seconds = check_seconds(older_than, "prune(older_than=...)", allow_none=False)
        assert seconds is not None
        n = self._retention.prune(seconds)
        self._log.info("workflows_pruned", count=n, older_than=seconds)
        return n

    def _unknown(self, workflow_id: str) -> UnknownWorkflow:
        """The error for an id the file does not hold, saying whether it may have been pruned."""
        try:
            pruned: int | None = self._rt.store.pruned_total()
        except Exception:
            pruned = None  # the file cannot say: the message allows for both
        return UnknownWorkflow(workflow_id, self.db, pruned=pruned, retention=self.retention)

    def broadcast(self, name: str, filter_value: Any = None, payload: Any = None) -> int:
        """Signal every workflow subscribed to ``(name, filter_value)``; returns how many."""
        self._check_open()
        if isinstance(name, str):
            check_text(name, "broadcast name")
        key = filter_key(filter_value)

        def wake(p: Promise[tuple[list[Delivered], list[tuple[str, Dropped]]]]) -> None:
            if p.exception() is not None:
                return
            delivered, dropped = p.result()
            if self._rt.metrics is not None:
                self._rt.metrics.signal_sent("broadcast", len(delivered))
            self._rt.wake(delivered)
            for wid, why in dropped:
                # A subscriber that ended is expected; a full inbox is worth a warning (as for a
                # workflow's own sends, which its history records).
                level = self._log.debug if why.expected else self._log.warning
                level("broadcast_dropped", workflow_id=wid, name=name, filter=key, reason=str(why))

        written = self._rt.store.submit_broadcast(name, key, dumps(payload), at=self.clock.now())
        self._rt.after_commit(written, wake)
        return len(written.result(self._rt.commit_timeout)[0])

    async def broadcast_async(self, name: str, filter_value: Any = None, payload: Any = None) -> int:
        """``broadcast`` for asyncio code: how many got it, once durable, without blocking the loop.

        The write waits for its commit, so it runs on the system's own executor (at most
        ``ASYNC_WORKERS`` threads), never on the loop's.
        """
        return await self._aio.run(self._closed_error, self.broadcast, name, filter_value, payload)

    def workflows(self, status: Status | str | None = None, type: Any = None) -> list[WorkflowInfo]:
        """Snapshots of the workflows in the file, optionally by status and type."""
        self._check_open()
        st = Status(status).value if status is not None else None
        ty = getattr(type, "__workflow_key__", type)
        recs = self._rt.store.list_workflows(status=st, type=ty)
        published = _talk.published_values(self, [r.id for r in recs])
        return self._schedules.with_ticks([info_from_record(r, published.get(r.id, {})) for r in recs])

    def idle(self, timeout: float | None = None) -> None:
        """Block until nothing is left to do now: no message queued, no step or procedure running,
        no timer due. Raises ``TimeoutError`` after ``timeout`` seconds."""
        self._check_open()
        rt = self._rt
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._idle_now():
                return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise self._idle_timed_out(timeout)
            rt.work.wait(0.01 if remaining is None else min(remaining, 0.01))
            if rt.work.count == 0:
                time.sleep(0.001)  # something else is pending (a due timer): let it be picked up

    async def idle_async(self, timeout: float | None = None) -> None:
        """``idle`` for asyncio code: returns once nothing is left to do now, without blocking the loop.

        Checks every 5 ms, each check (a short read of the file) on the system's executor; between
        checks nothing waits on a thread. Raises ``TimeoutError`` after ``timeout`` seconds.
        """
        self._check_open()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if await self._aio.run(self._closed_error, self._idle_now):
                return
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise self._idle_timed_out(timeout)
            await asyncio.sleep(_IDLE_POLL if remaining is None else min(remaining, _IDLE_POLL))

    def _idle_now(self) -> bool:
        """Nothing is left to do now (what ``idle`` waits for)."""
        self._check_open()
        rt = self._rt
        # No lock is held while checking (the timer service takes its lock, then the
        # counter's). The count is read last: every source below counts its work before it
        # lets go of it, so work handed on between the checks is still seen.
        return (
            not self._external_pending()
            and not (self._leads() and self._retention.due())
            and not self._schedules.due(self._leads())
            and not rt.timers.has_due()
            and not rt.activator.has_waiting()
            and rt.work.count == 0
        )

    def _idle_timed_out(self, timeout: float | None) -> TimeoutError:
        rt = self._rt
        return TimeoutError(
            f"system.idle() timed out after {timeout}s: {rt.work.count} messages or "
            f"procedures in flight, timers due: {rt.timers.has_due()}"
        )

    # -- internals -----------------------------------------------------------------------------
    def _external_pending(self) -> bool:
        """Requests from other processes (the wf CLI) not carried out yet, and not waiting for
        room in a full inbox (those wait for the workflow, not for the system)."""
        return any(r.seq not in self._external_waiting and self._mine(r)
                   for r in self._rt.store.take_external(0))

    def _append(self, workflow_id: str, kind: str, name: str, payload: Any, what: str) -> None:
        self._check_open()
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what} name must be a non-empty string, got {name!r}")
        check_text(name, f"{what} name")
        try:
            blob = dumps(payload)
        except Exception as e:
            raise TypeError(f"{what} {name!r} to {workflow_id!r}: payload cannot be pickled ({e})") from e
        if kind == SIGNAL and self._rt.metrics is not None:
            self._rt.metrics.signal_sent("client")
        try:
            if kind == SIGNAL and self._rt.owns(workflow_id):
                # Handed to the workflow's actor, which makes it durable (consumed by the step it
                # resumes, or in the inbox) and answers: this thread only waits.
                msg = DirectSignal(name, blob, self.clock.now())
                self._rt.activator.deliver(workflow_id, msg)
                msg.reply.result(self._rt.commit_timeout)
                return
            written = self._rt.store.submit_append_inbox(workflow_id, kind, name, blob, at=self.clock.now())
            self._rt.after_commit(written, self._wake_after)
            written.result(self._rt.commit_timeout)
        except UnknownWorkflowId:
            raise self._unknown(workflow_id) from None
        except WorkflowFinished as e:
            raise WorkflowNotRunning(workflow_id, e.status, f"{what} {name!r}") from e

    def _wake_after(self, written: Promise[Delivered]) -> None:
        """Once an append committed (on the writer's thread): wake its workflow."""
        if written.exception() is None:
            self._rt.wake([written.result()])

    def schedule(
        self,
        id: str,
        wf: WorkflowFunction[..., Any],
        /,
        *args: Any,
        cron: str | None = None,
        every: float | None = None,
        timezone: str = "UTC",
        overlap: str = "skip",
        catchup: str = "latest",
    ) -> ScheduleInfo:
        """Start ``wf(*args)`` at each tick of ``cron`` (in ``timezone``) or every ``every``
        seconds, as the workflow ``f"{id}@{tick}"`` (tick in ISO 8601 UTC); stored, so it goes on
        across restarts, and each tick starts exactly once. ``overlap="skip"`` skips a tick while
        the previous run still runs (``"allow"``: it does not); after downtime
        ``catchup="latest"`` starts the latest missed tick only (``"all"``, ``"none"``).
        Scheduling an id again updates it. An invalid expression raises ``ValueError``."""
        self._check_open()
        return self._schedules.schedule(id, wf, args, cron, every, timezone, overlap, catchup)

    def schedules(self) -> list[ScheduleInfo]:
        """Every schedule of the database, with its next tick."""
        self._check_open()
        return self._schedules.schedules()

    def unschedule(self, id: str) -> bool:
        """Delete the schedule ``id`` (the workflows it started stay); False if there was none."""
        self._check_open()
        return self._schedules.unschedule(id)

    def nodes(self) -> list[NodeInfo]:
        """The live nodes of the cluster on this database (on SQLite: this process alone, which
        holds the whole file as one shard)."""
        self._check_open()
        cluster = self._rt.cluster
        if cluster is None:
            return [NodeInfo(self.node_id, 1, 0.0, self._started_at)]
        return [NodeInfo(n.node_id, n.shards, n.heartbeat_age, n.started_at, n.state)
                for n in cluster.nodes() if n.state in ("up", "stale")]

    def live_actors(self) -> int:
        """How many workflow actors are live now (at most ``max_live``)."""
        return self._rt.activator.live_count()
