"""The runtime host: what the actors of one system share (the store, the clock, the services,
supervision), and what they call on it (``Host``)."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

from actors._log import SystemLog
from persistence import (
    Delivered,
    ProcedureRow,
    Promise,
    StepAck,
    StepWrite,
    StorageUnavailable,
    Store,
    TimerRow,
)

from ._activator import Activator
from ._actor import (
    Escalate,
    EscalationFailed,
    Kick,
    TimerFired,
    Wake,
    WorkflowActor,
)
from ._clock import Clock
from ._host import Host
from ._metrics import Metrics
from ._outcomes import Outcome, Outcomes
from ._pool import Dispatcher
from ._procedures import ProcedureExecutor
from ._recovery import carry_on
from ._timers import TimerService
from ._work import WorkCounter

_T = TypeVar("_T")

R = TypeVar("R")


RESTART_INTENSITY = 5  # restarts ...
RESTART_PERIOD = 60.0  # ... within this many seconds (system clock), then it fails (OTP's MaxR/MaxT)
# A workflow whose write failed for a reason of the storage is tried again after this many seconds,
# doubling at each failure up to the maximum (with jitter), for as long as the episode lasts.
STORAGE_BACKOFF = 0.02
STORAGE_BACKOFF_MAX = 2.0
# The least a caller with a timeout of its own waits for its write to commit.
WRITE_WAIT_MIN = 1.0


class Runtime:
    """What the actors share: the store, the clock, the services, supervision."""

    commit_timeout = 60.0

    def __init__(self, store: Store, clock: Clock, procedure_workers: int, max_live: int, passivate_after: float,
                 system_log: SystemLog, engine_threads: int = 4) -> None:
        # The system's context, bound once (``SystemLog``): each service gets its part's logger.
        self.system_log = system_log
        self.log = system_log.part("system")
        self.workflow_log = system_log.part("workflow")
        self.store = store
        self.clock = clock
        self.passivate_after = passivate_after
        self.work = WorkCounter()
        # The engine: its threads step the actors one at a time, each drain committed as one
        # transaction; another thread steps while one waits for the disk, or for a server.
        self.dispatcher = Dispatcher(engine_threads, flush=store.flush_staged, staged=store.staged_writes)
        host: Host = self  # what the actors see of the runtime
        # This node of the database's cluster (on SQLite, a cluster of one): the shards it
        # leases say which workflows run here.
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
        self.metrics: Metrics | None = None  # set by the system when it counts (``metrics=``)
        self.shards_taken = 0
        # A storage episode (writes failing for a reason of the storage): when it began, how many
        # writes failed, and each waiting workflow's count of attempts (its backoff).
        self._storage_since: float | None = None
        self._storage_faults = 0
        self._storage_attempts: dict[str, int] = {}
        self._storage_kicks: set[str] = set()  # waiting to try a step again (not an escalation)

    def written(self, promise: Promise[_T], what: str, timeout: float | None = None,
                then: str | None = None) -> _T:
        """The outcome of a write a caller waits for (``what`` it did), waiting up to
        ``commit_timeout`` seconds, or ``timeout`` if that is shorter. A storage that does not
        answer in that time (a database server that is frozen or unreachable without an error,
        a disk that blocks) raises a ``TimeoutError`` saying so, and that the write, still queued,
        may yet be carried out: ``then`` says what the caller can do (by default: look before
        doing it again)."""
        # (A write commits in milliseconds: even a caller's timeout of 0 gives it a second.)
        wait = self.commit_timeout if timeout is None else min(self.commit_timeout, max(WRITE_WAIT_MIN, timeout))
        try:
            return promise.result(wait)
        except TimeoutError:
            if promise.done():
                return promise.result(0)
            where = getattr(self.store, "path", "the database")
            raise TimeoutError(
                f"{what}: the storage ({where}) did not answer within {wait:g}s (a database server "
                f"that does not respond, or a disk that blocks). The write is still queued and may "
                f"yet be carried out once the storage answers; "
                + (then or "look (status(), info(), wf show) before doing it again")
            ) from None

    def owns(self, workflow_id: str) -> bool:
        """True if this node runs ``workflow_id`` (always, but on a cluster's node)."""
        return self.store.owns(workflow_id)

    # -- called by the cluster (its own thread) --------------------------------------------------
    def shards_gained(self, shards: set[int]) -> None:
        """Leases taken: recover what these shards hold (due timers, pending procedures under
        their keys, workflows with work), as at the opening of a system."""
        self.work.inc()
        try:
            self.shards_taken += len(shards)
            work = self.cluster.recovery_work(shards)
            shard_for = self.cluster.shard_for
            self.timers.refill(again=lambda wid: shard_for(wid) in shards)
            carry_on(self, work, reload=True)
            self.log.info("shards_gained", count=len(shards), owned=len(self.cluster.owned_shards()),
                     activated=len(work.with_work), procedures=len(work.procedures))
        finally:
            self.work.dec()

    def shards_lost(self, shards: set[int]) -> None:
        """Leases gone (handed off, or taken by another node): writes for them are refused from
        now on; their idle actors stop (a busy one stops when its commit is refused)."""
        n = self.activator.passivate_where(lambda wid: not self.owns(wid))
        self.log.info("shards_lost", count=len(shards), owned=len(self.cluster.owned_shards()),
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
        workflow_type: str | None = None,
    ) -> None:
        """Carry out what a committed step asked for: only now may anything leave the actor."""
        if sw.published or sw.replies:
            self.news(workflow_id)
        if sw.cancel_timers:
            self.timers.cancel(sw.cancel_timers)
        if sw.cancel_procedures:
            self.procedures.cancel(sw.cancel_procedures)
        if timers and not test_mode:
            self.timers.arm(timers)
        for p in sw.new_procedures:
            self.procedures.dispatch(ProcedureRow(p.key, workflow_id, p.function, p.args, "pending", 1, None, None, 0.0),
                                     workflow_type=workflow_type)
        if ack.created:
            types = {w.id: w.type for w in sw.new_workflows}
            spread = {w.id for w in sw.new_workflows if w.spread}
            remote = False
            if self.metrics is not None:
                for child in ack.created:
                    self.metrics.workflow_started(types.get(child))
            for child in ack.created:
                self.log.info("workflow_started", workflow_id=child, workflow_type=types.get(child), parent_id=workflow_id)
                if child not in spread:
                    self.cluster.note_child(child, workflow_id)  # in its parent's shard
                if self.owns(child):
                    self.activator.deliver(child, Kick(seeds.get(child) if seeds else None))
                else:
                    remote = True  # spread to another node's shard: its owner starts it
            if remote:
                self.cluster.publish_wake()
        if ack.delivered:
            self.wake(ack.delivered)
        for wid, why in ack.dropped:
            # A message to a workflow that has just ended (a child's parent, a cancelled child) is
            # expected; an unknown target or a full inbox is a mistake worth a warning.
            level = self.log.debug if why.expected else self.log.warning
            level("signal_dropped", workflow_id=workflow_id, workflow_type=workflow_type, target=wid, reason=str(why))

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
            owned = cluster.owns_cached(d.workflow_id)
            if owned is None:
                unknown.append(d)  # its shard must be read: not on this (the writer's) thread
            elif owned:
                self.activator.deliver(d.workflow_id, Wake(d.row()))
            else:
                remote = True
        if remote:
            # The commit left a wake-up row for the owner: tell it (after the commit, never in it).
            cluster.publish_wake()
        if unknown:
            self.timers.call_later(0.0, lambda: self.wake_read(unknown))

    def wake_read(self, delivered: list[Delivered]) -> None:
        """``wake`` for rows whose workflows' shards this node has not read yet."""
        remote = False
        for d in delivered:
            if self.owns(d.workflow_id):
                self.activator.deliver(d.workflow_id, Wake(d.row()))
            else:
                remote = True
        if remote:
            self.cluster.publish_wake()

    def message_done(self, workflow_id: str, ended: Any = None) -> None:
        self.activator.done(workflow_id, ended)

    @contextlib.contextmanager
    def pruning(self) -> Iterator[None]:
        """Around a prune's batch, from before its transaction until the runtime forgot what it
        deleted: it counts as work (``idle()`` waits for it: its commit ends ``due()`` before the
        batch is done), and ``result()`` reads the store meanwhile (``Outcomes.pruning``)."""
        self.work.inc()
        try:
            with self.outcomes.pruning():
                yield
        finally:
            self.work.dec()

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
        self.cluster.publish_done([workflow_id])

    def news(self, workflow_id: str) -> None:
        """A step of this node published or replied: wake whoever waits on ``workflow_id``
        (``ref.published``, ``ref.ask``) here, and tell the nodes that said they wait on it."""
        self._finish_wake(workflow_id)
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
        if self.cluster.owns_cached(workflow_id) is not True:
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
        """A runtime fault in an actor: restart it from its last checkpoint, with backoff.

        The intensity's period is on the system's clock (a ``VirtualClock`` moved on a minute
        forgets the restarts before it); the backoff before a restart is real time, so that a
        restart never waits for a test to move its clock."""
        now = self.clock.now()
        with self._restart_lock:
            hist = self._restarts.setdefault(workflow_id, deque())
            while hist and hist[0] < now - RESTART_PERIOD:
                hist.popleft()
            hist.append(now)
            n = len(hist)
        if n > RESTART_INTENSITY:
            if isinstance(error, EscalationFailed):
                self.log.error("workflow_escalation_failed", workflow_id=workflow_id, workflow_type=workflow_type,
                               error=repr(error.__cause__))
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
        self.timers.call_later(delay, lambda: self.activator.deliver(workflow_id, Kick()))

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
        self.timers.call_later(delay, lambda: self.activator.deliver(workflow_id, retry))

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
