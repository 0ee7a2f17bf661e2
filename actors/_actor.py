"""The workflow actor: one pykka actor per live workflow instance.

Its mailbox receives signals, timer ticks, procedure replies and child outcomes (all already durable
in SQLite before they are sent, so a lost mailbox loses nothing). It runs its workflow's steps one
at a time: resolve what the workflow waits for, run the compiled code to its next suspension, and
commit the step (continuation, reducers, outgoing messages, new timers/procedures/children) in one
transaction through the store's group-commit writer. Only then does anything leave the actor.

The handling of a message is a generator that yields each commit's ``Promise`` and gets its
acknowledgement back. On a dispatcher thread the actor pauses there (``pause_until``) and its
thread runs other actors until the writer has committed, so a hundred children finishing together
reach the writer together instead of sixteen at a time. On a caller's thread (a signal handled
where it was sent) it simply waits.
"""

from __future__ import annotations

import collections
import functools
import json
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from persistence import (
    CANCEL,
    CANCELLED,
    CHILD,
    COMPLETED,
    FAILED,
    RECENT_STEPS,
    RUNNING,
    SIGNAL,
    InboxRow,
    MalformedPayload,
    NewProcedure,
    NewTimer,
    NewWorkflow,
    OutBroadcast,
    OutSignal,
    Promise,
    StepWrite,
    TimerRow,
    WorkflowExists,
    dumps,
    loads,
)
from workflows import Cancelled, ChildFailed, ProcedureFailed, WorkflowError
from workflows._compiler import checkpoint, restore, step
from workflows._context import Broadcast, ReducerCall, Send, StepContext, Subscribe, Unsubscribe
from workflows._errors import CheckpointError, UnknownWorkflowType, VersionMismatch
from workflows._registry import check_findable, resolve
from workflows._step import Finished, Raised, Suspended

from ._errors import TimerNotArmed
from ._log import Log
from ._pool import PooledActor
from ._procedures import ProcedureDone, error_info, pack_call, record_outcome
from ._wait import Arm, Resolution, Wait, build_wait, envelope, envelope_wait, stored_forms
from ._wait import resolve as resolve_arm

if TYPE_CHECKING:
    from ._system import Runtime

log = Log("workflow")

CONSUMED_MEMORY = 50_000

# What the handling of a message is: a generator that yields each commit's promise and is sent its
# acknowledgement (or has its error thrown in), returning whatever the step returns.
Steps = Generator[Promise[Any], Any, Any]


# -- messages -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kick:
    """Load the workflow (if needed) and do whatever work it has.

    ``seed`` is the state of a workflow just created by this process (its stored record and its
    live continuation): an actor whose very first message this is starts from it instead of
    reading back what was committed a moment ago.
    """

    seed: tuple[NewWorkflow, Any, bytes] | None = None  # record, continuation, its checkpoint
    # Set when the record is not written yet: the first step inserts it, in its own commit, then
    # this gets True (False: the id was taken meanwhile, and nothing was written).
    created: Promise[bool] | None = None


@dataclass(frozen=True)
class Wake:
    """A new inbox row (signal, cancel, child outcome). ``row`` None: reload the inbox."""

    row: InboxRow | None = None


@dataclass(frozen=True)
class TimerFired:
    row: TimerRow
    debug: bool = False


class DirectSignal:
    """``ref.signal()``: a signal handed to the actor, answered once it is durable.

    If the workflow awaits this signal now (and none of that name is buffered before it), the step
    that consumes it is the only write: the signal never needs an inbox row of its own. Otherwise
    it is appended to the inbox. Either way ``reply`` resolves only after the commit. (A plain
    class: one is made per signal sent, and a frozen dataclass costs several times more to make.)
    """

    __slots__ = ("name", "payload", "created_at", "reply")

    def __init__(self, name: str, payload: bytes, created_at: float) -> None:
        self.name = name
        self.payload = payload
        self.created_at = created_at
        self.reply: Promise[None] = Promise()

    def __repr__(self) -> str:
        return f"DirectSignal(name={self.name!r}, created_at={self.created_at!r})"


@dataclass(frozen=True)
class Escalate:
    """The actor faulted past the restart intensity: record the workflow as failed."""

    error: BaseException


@dataclass(frozen=True)
class FireTimer:
    """``debug_fire_timer(name)``: fire the armed timer called ``name`` now."""

    name: str
    reply: Promise[None] = field(default_factory=Promise)
    # The `wf fire-timer` request this carries out (its seq): the step that takes the timer
    # deletes it, in the same transaction.
    external_seq: int | None = None


# Messages that only make an event available: while another is queued next, resolution waits.
_EVENTS = (Wake, TimerFired, ProcedureDone)


def filter_key(value: Any) -> str:
    """Canonical JSON of a subscription filter value."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    except TypeError as e:
        raise TypeError(
            f"subscription filter values must be JSON values (str, int, float, bool, None, lists, "
            f"dicts), got {value!r}"
        ) from e


class _RuntimeFault(Exception):
    """A fault outside workflow code (store, reducer, serialization): restart the actor."""


class _NotCreated(Exception):
    """The first step of a workflow being started found its id taken: it wrote nothing."""


class WorkflowActor(PooledActor):
    """Runs one workflow's steps, one at a time (on the runtime's shared actor threads)."""

    blocked: bool  # its code changed or is missing: held, not run (set by each load)

    def __init__(self, rt: Runtime, workflow_id: str, set_up_here: bool = False) -> None:
        super().__init__(rt.dispatcher, set_up_here=set_up_here)
        self.rt = rt
        self.id = workflow_id
        self.loaded = False
        self.ever_loaded = False
        self.type = ""
        # The start being created by the first step (its Kick, with seed and created), until
        # that step commits.
        self.creating: Kick | None = None
        self.absent = False  # the last load found no workflow of this id
        # The step being committed, from its write until what it asked for is carried out, and
        # the procedure calls of it handed over so far: what a resync needs if the thread is
        # interrupted in between (see ``Runtime.resync``).
        self.unsettled: StepWrite | None = None
        self.dispatched: set[str] = set()
        # `wf fire-timer` requests carried out by a committed step (their seqs, the newest few):
        # the request may be read again before that commit, and must not fire the next timer.
        self.fire_requests_done: collections.deque[int] = collections.deque(maxlen=64)

    @property
    def log(self) -> Any:
        # Bound on use: binding costs more than the few lifecycle events an actor logs.
        return log.bind(workflow_id=self.id, workflow_type=self.type)

    # -- pykka hooks --------------------------------------------------------------------------
    def on_receive(self, message: Any) -> Any:
        self._drive(self._handle(message), message, None, None)
        return None

    def _drive(self, steps: Steps, message: Any, value: Any, error: BaseException | None) -> None:
        """Run the handling of ``message`` up to its end, or to a commit not done yet (pause)."""
        paused = False
        try:
            while True:
                try:
                    promise = steps.send(value) if error is None else steps.throw(error)
                except StopIteration:
                    return
                value = error = None
                if not promise.done() and not self.running_inline:
                    paused = True
                    self.pause_until(promise, functools.partial(self._resume_after, steps, message, promise))
                    return
                try:
                    value = promise.result(self.rt.commit_timeout)
                except Exception as e:
                    error = e
        except Exception as e:
            self.unsettled = None  # the restart reloads from the store
            self._fault(message, e)
        except BaseException:
            # The thread was interrupted mid-message (KeyboardInterrupt on a caller's thread):
            # what is in memory may be ahead of the store. The next message reloads it, and a
            # resync carries out what a step written meanwhile asked for.
            self.loaded = False
            unsettled, self.unsettled = self.unsettled, None
            self.rt.resync(self.id, unsettled, self.dispatched)
            raise
        finally:
            if not paused:
                self.rt.activator.done(self.id)

    def _resume_after(self, steps: Steps, message: Any, promise: Promise[Any]) -> None:
        error = promise.exception(0)
        self._drive(steps, message, None if error is not None else promise.result(0), error)

    def _fault(self, message: Any, e: Exception) -> None:
        self.loaded = False
        if isinstance(e, _NotCreated) or not self._created_alone():
            # Nothing was written and this actor's id is another workflow's: forget the seed, so
            # that a next message loads that workflow from the store. Not a fault.
            self.ever_loaded = False
            return
        if isinstance(message, FireTimer) and not message.reply.done():
            message.reply.set_exception(e)
        if isinstance(message, DirectSignal) and not message.reply.done():
            self._append_signal(message)
        # Outcomes held only in memory (this message's, and those taken before it while events
        # were queued) go to their rows: the restart then finds them in the store.
        held = dict(getattr(self, "done_procs", {}))
        if isinstance(message, ProcedureDone):
            held[message.key] = message
        for done in held.values():
            if not done.durable:
                self._record_outcome(done)
        why = _missing_code(e)
        if why is not None:
            self._hold_for_code(why)
            return
        self.rt.fault(self.id, e, self.type or None)

    def _hold_for_code(self, why: str) -> None:
        """A step needs code this process lacks (a class of a payload it takes): hold the
        workflow as blocked, as when its own code is missing, instead of restarting it until it
        fails. Its next load (a restart with the code) tries the step again."""
        try:
            self._load()
            if self.finished or self.absent or self.blocked:
                return
            rec = self.rt.store.load_workflow(self.id)
            self.blocked = True
            self.log.error("workflow_code_missing", error=why)
            self._record_blocked(rec, why, "code_missing")
        except Exception as e:
            self.loaded = False
            self.rt.fault(self.id, e, self.type or None)

    def _created_alone(self) -> bool:
        """After a first step of a start failed (not for its id): write the record alone.

        The start is then what it would have been without the first step in its transaction, and
        the failure is a fault of that first step: restarted, with backoff, up to the intensity.
        False if the id was taken meanwhile (nothing of this workflow exists).
        """
        creating = self.creating
        if creating is None:
            return True
        try:
            created = self.rt.store.create_workflow(creating.seed[0])  # type: ignore[index]
        except Exception as e:  # the record cannot be written either: the start fails
            self.creating = None
            creating.created.set_exception(e)  # type: ignore[union-attr]
            return False  # nothing of this workflow exists: nothing to restart
        self._settle_start(created)
        return created

    def _settle_start(self, created: bool) -> None:
        """The start being created is settled: written (logged) or not (its id was taken)."""
        creating, self.creating = self.creating, None
        assert creating is not None and creating.created is not None
        if created:
            log.info("workflow_started", workflow_id=self.id, workflow_type=self.type, test_mode=self.test_mode)
        creating.created.set_result(created)

    def on_failure(self, exception_type: Any, exception_value: Any, traceback: Any) -> None:
        self.rt.fault(self.id, exception_value, self.type or None)

    # -- state ----------------------------------------------------------------------------------
    def _reset(self) -> None:
        self.ever_loaded = True
        self.inbox: list[InboxRow] = []
        # Inbox rows consumed since the load: a Wake can still be queued for one of them.
        self.consumed_seqs: set[int] = set()
        self.consumed_order: collections.deque[int] = collections.deque()
        self.fired: dict[int, TimerRow] = {}
        self.fire_requests: dict[int, int] = {}  # fired timer id -> its `wf fire-timer` request
        # Consumption of gather arms resolved but not committed yet (inbox, timers, procedures).
        self.acc: tuple[list[int], list[int], list[str]] = ([], [], [])
        self.acc_dirty = False
        self.done_procs: dict[str, ProcedureDone] = {}
        self.blocked = False
        # Events taken from the mailbox but not resolved yet (more messages were queued).
        self.deferred = False

    def _load_seed(self, new: NewWorkflow, cont: Any, blob: bytes) -> None:
        """Start from a workflow this process has just created: nothing stepped, nothing queued."""
        self._reset()
        self.absent = False
        self.finished = False
        self.type = new.type
        self.parent_id = new.parent_id
        self.detached = new.detached
        self.test_mode = new.test_mode
        self.seq = 0
        self.wait: Wait | None = None
        self.recent: str | None = None
        self.recent_count = 0
        self.cont_blob: bytes = blob
        self.cont = cont
        self.loaded = True

    def _load(self) -> None:
        rec, inbox, timer_rows, proc_rows = self.rt.store.load_state(self.id)
        self._reset()
        self.absent = rec is None
        self.finished = rec is None or rec.status != RUNNING
        if rec is None or self.finished:
            self.loaded = True
            return
        self.type = rec.type
        self.parent_id = rec.parent_id
        self.detached = rec.detached
        self.test_mode = rec.test_mode
        self.seq = rec.step_seq
        recent = rec.recent_steps or None
        count = recent.count("\n") + 1 if recent else 0
        if recent and count > RECENT_STEPS:  # written by a version that kept more
            recent = "\n".join(recent.split("\n")[-RECENT_STEPS:])
            count = RECENT_STEPS
        self.recent, self.recent_count = recent, count
        assert rec.continuation is not None
        env = loads(rec.continuation)
        self.wait = envelope_wait(env)
        self.cont_blob = env["cont"]
        try:
            self.cont = restore(self.cont_blob)
        except (VersionMismatch, UnknownWorkflowType) as e:
            # Never resume a stale continuation, and never fail a workflow because this process
            # lacks its code (a script run from the wrong directory, a module renamed in a
            # deploy): keep it as it is, say so where users look, and take only a cancel. The
            # next load (a restart with the right code) resumes it.
            self.blocked = True
            self.loaded = True
            self.inbox = inbox
            missing = isinstance(e, UnknownWorkflowType)
            self.log.error("workflow_code_missing" if missing else "workflow_version_mismatch", error=str(e))
            self._record_blocked(rec, str(e), "code_missing" if missing else "version_mismatch")
            return
        if self.wait is not None and _blocked_reason(rec) is not None:
            self._record_unblocked(rec)
        if self.wait is not None:
            pending_timer_arms = [a for a in self.wait.arms if a.kind == "timer" and not a.done]
            rows = sorted(timer_rows, key=lambda r: r.id)
            for arm, row in zip(pending_timer_arms, rows, strict=False):
                arm.timer_id = row.id
                if not self.test_mode and row.due_at <= self.rt.clock.now():
                    self.fired[row.id] = row
        self.inbox = inbox
        for p in proc_rows:
            if p.status == "done":
                assert p.result is not None
                self.done_procs[p.key] = ProcedureDone(p.key, True, loads(p.result), None, p.attempts)
            elif p.status == "failed":
                self.done_procs[p.key] = ProcedureDone(
                    p.key, False, None, json.loads(p.error or "{}"), p.attempts
                )
        self.loaded = True

    def _record_blocked(self, rec: Any, why: str, event: str) -> None:
        """Show why the workflow cannot run (a version mismatch, its code missing) in waiting_on
        and the history (once), keeping the checkpoint."""
        waiting = json.loads(self.wait.describe()) if self.wait else {"mode": "one", "arms": []}
        if _blocked_reason(rec) == why:
            return
        waiting["blocked"] = why
        self._commit_waiting_on(rec, json.dumps(waiting), (event, json.dumps({"message": why})))

    def _record_unblocked(self, rec: Any) -> None:
        """A workflow shown as blocked loads again: show what it waits for, and that it runs."""
        assert self.wait is not None
        self._commit_waiting_on(rec, self.wait.describe(), ("resumed", json.dumps({"message": "its code loads again"})))
        self.log.info("workflow_unblocked")

    def _commit_waiting_on(self, rec: Any, waiting_on: str, event: tuple[str, str]) -> None:
        sw = StepWrite(
            workflow_id=self.id,
            step_seq=rec.step_seq + 1,
            waiting_on=waiting_on,
            wait_signals=self.wait.signal_names() if self.wait else (),
            updated_at=self.rt.clock.now(),
            history=[event],
        )
        self.rt.store.commit_step(sw, timeout=self.rt.commit_timeout)
        self.seq = rec.step_seq + 1

    def _handle(self, message: Any) -> Steps:
        if isinstance(message, Escalate):
            self.loaded = False  # whatever is in memory is suspect; the store has the truth
            self.rt.escalate(self.id, message.error)
            return
        kick_seed = isinstance(message, Kick) and message.seed is not None
        if kick_seed and message.created is not None:
            if self.loaded and not self.absent:  # holds a workflow of this id (running or ended)
                message.created.set_result(False)
                return
            # Not loaded, or loaded and found nothing (a message for the id came first): from
            # the seed. The INSERT of its first step is the real guard against a taken id.
            self.creating = message
            self._load_seed(*message.seed)
            fresh = True
        elif not self.loaded or (kick_seed and self.absent):
            # A workflow just created here, whose actor had looked for it before it existed (a
            # signal sent to its id first, say): that look is stale, read the record.
            if kick_seed and not self.ever_loaded:
                self._load_seed(*message.seed)
            else:
                self._load()
            fresh = True
        else:
            fresh = False
        if isinstance(message, DirectSignal):
            if self.finished:
                self._append_signal(message)  # the store says why it cannot take it
                return
            if not self.blocked and (yield from self._take_direct(message)):
                yield from self._pump()
                return
            self._append_signal(message)
            if message.reply.exception() is None and not self.blocked:
                yield from self._pump()
            return
        if self.finished or self.blocked:
            if isinstance(message, ProcedureDone):
                self._record_outcome(message)
            if isinstance(message, FireTimer):
                message.reply.set_exception(TimerNotArmed(self.id, message.name, []))
            if self.blocked and not self.finished:
                cancel = self._blocked_cancel(message)
                if cancel is not None:
                    yield from self._cancel_blocked(cancel)
            return
        if isinstance(message, Wake):
            if message.row is None:
                if not fresh:
                    known = {r.seq for r in self.inbox}
                    for r in self.rt.store.inbox(self.id):
                        if r.seq not in known:
                            self.inbox.append(r)
            elif fresh:
                pass  # the load read the inbox, this row included
            elif message.row.seq in self.consumed_seqs:
                pass  # its Wake was queued behind the step that already consumed it
            elif not self.inbox or message.row.seq > self.inbox[-1].seq:
                self.inbox.append(message.row)  # the usual case: newer than every row held
            elif all(r.seq != message.row.seq for r in self.inbox):
                self.inbox.append(message.row)
                self.inbox.sort(key=lambda r: r.seq)
        elif isinstance(message, TimerFired):
            if message.debug or not self.test_mode:
                self.fired[message.row.id] = message.row
        elif isinstance(message, ProcedureDone):
            if message.durable or (self.wait is not None and self.wait.arm_for_procedure(message.key)):
                self.done_procs[message.key] = message
            else:
                self._record_outcome(message)  # not awaited now (a select disarmed it): keep it
        elif isinstance(message, FireTimer):
            seq = message.external_seq
            if seq is not None and (seq in self.fire_requests.values() or seq in self.fire_requests_done):
                message.reply.set_result(None)  # carried out already (or being committed)
                return
            arm = self.wait.arm_for_timer_name(message.name) if self.wait else None
            if arm is None or arm.timer_id is None:
                pending: list[Arm] = self.wait.pending() if self.wait else []
                armed = [a.name for a in pending if a.kind == "timer"]
                message.reply.set_exception(TimerNotArmed(self.id, message.name, armed))
                return
            self.fired[arm.timer_id] = TimerRow(arm.timer_id, self.id, arm.target, arm.due_at or 0.0)
            if seq is not None:
                self.fire_requests[arm.timer_id] = seq
            message.reply.set_result(None)
        if isinstance(message, _EVENTS) and isinstance(self.actor_inbox.peek(), _EVENTS):
            # Another event is queued next (a hundred children's outcomes arrive as a hundred
            # wake-ups): take them all first, then resolve and commit once, in time order. Only
            # behind an event: whatever else comes next (a stop, say) finds them resolved.
            self.deferred = True
            return
        yield from self._pump()

    def _blocked_cancel(self, message: Any) -> InboxRow | None:
        """The cancel request a blocked workflow holds, if any (keeping its inbox up to date)."""
        if isinstance(message, Wake):
            if message.row is None:
                self.inbox = self.rt.store.inbox(self.id)
            elif all(r.seq != message.row.seq for r in self.inbox):
                self.inbox.append(message.row)
        return next((r for r in self.inbox if r.kind == CANCEL), None)

    def _cancel_blocked(self, cancel: InboxRow) -> Steps:
        """End a workflow that cannot run (its code changed or is missing) as cancelled.

        Its code cannot run, so no ``finally`` or ``except Cancelled`` of it does: the step is the
        runtime's alone. What it waited for is disarmed and its children are cancelled, as for
        any ending; its last checkpoint stays in its row.
        """
        reason = loads(cancel.payload)
        self.log.info("workflow_cancel_requested", reason=reason, blocked=True)
        sw = self._base_write([cancel.seq], [], [])
        self._note(sw, ("cancel", ',"reason":' + _text(reason)))
        yield from self._finish(sw, Raised(Cancelled(reason)), self.wait.pending() if self.wait else [])

    def _record_outcome(self, message: ProcedureDone) -> None:
        try:
            record_outcome(self.rt.store, message)
        except Exception as e:  # the row stays pending: the call runs again at recovery
            self.log.warning("procedure_outcome_not_recorded", key=message.key, error=repr(e))

    def _append_signal(self, message: DirectSignal) -> None:
        """Make a signal durable in the inbox and answer its sender (or tell it why not)."""
        if message.reply.done():
            return
        try:
            d = self.rt.store.append_inbox(self.id, SIGNAL, message.name, message.payload, at=message.created_at)
        except Exception as e:
            message.reply.set_exception(e)
            return
        if self.loaded and not self.finished:
            self.inbox.append(InboxRow(d.seq, self.id, SIGNAL, message.name, message.payload, message.created_at))
            self.inbox.sort(key=lambda r: r.seq)
            self._warn_if_never_awaited(message.name)
        message.reply.set_result(None)

    def _warn_if_never_awaited(self, name: str) -> None:
        # Only for a signal buffered, not one taken at once: a name the code never awaits stays
        # in the inbox for good (a typo, or a signal meant for another workflow).
        try:
            names = resolve("workflow", self.type).signal_names
        except Exception:  # the code is not here (a blocked workflow): nothing to compare with
            return
        if names is not None and name not in names:
            self.log.warning("signal_not_awaited", signal=name, awaited=sorted(names))

    def _take_direct(self, message: DirectSignal) -> Steps:
        """Consume a signal the workflow awaits now in the step it resumes; False if it cannot."""
        wait = self.wait
        inbox = self.inbox
        if self.deferred or self.seq == 0 or wait is None or (inbox and any(r.kind == CANCEL for r in inbox)):
            return False
        arm = wait.arm_for_signal(message.name)
        if arm is None or (inbox and any(r.kind == SIGNAL and r.name == message.name for r in inbox)):
            return False
        if wait.mode != "one" and (self.fired or self.done_procs):
            return False  # an earlier event may be waiting to win this select
        seq_before = self.seq
        try:
            yield from self._apply(
                resolve_arm(wait, arm, ok=True, value=loads(message.payload)), [], [], [],
                _named_cause("signal", message.name),
            )
            yield from self._flush()
        except GeneratorExit:
            raise  # abandoned while paused (the system closed): nothing to answer
        except Exception:
            # Only a fault: an interruption of the sender's thread (KeyboardInterrupt) goes on to
            # the sender as it is. The step's write, once made, commits (here or on the writer's
            # thread), so keeping the signal again would deliver it twice; made before that, the
            # signal was never acknowledged, and is not kept.
            if self.seq == seq_before:
                # The step did not commit: keep the signal durable before the fault restarts us.
                arm.done = False
                self._append_signal(message)
            elif not message.reply.done():
                message.reply.set_result(None)
            raise
        message.reply.set_result(None)
        return True

    # -- the loop -----------------------------------------------------------------------------
    def _pump(self) -> Steps:
        self.deferred = False
        while not self.finished:
            cancel = next((r for r in self.inbox if r.kind == CANCEL), None)
            if cancel is not None:
                reason = loads(cancel.payload)
                self.log.info("workflow_cancel_requested", reason=reason)
                losers: list[Arm] = self.wait.pending() if self.wait else []
                cause = ("cancel", ',"reason":' + _text(reason))
                if self.seq == 0:
                    yield from self._finish_without_running(Cancelled(reason), consume=[cancel.seq], cause=cause)
                else:
                    yield from self._run(throw=Cancelled(reason), consume_inbox=[cancel.seq], losers=losers, cause=cause)
                continue
            if self.seq == 0:
                yield from self._run(first=True, cause=("started", ""))
                continue
            if self.wait is None:
                return
            if not (yield from self._resolve_next()):
                if not (self.inbox or self.acc_dirty):
                    return  # no orphans can be held, and nothing taken is left to commit
                taken = set(self.acc[0])
                awaited = {a.child_id for a in self.wait.arms if a.kind == "child" and not a.done}
                orphans = [
                    r.seq for r in self.inbox
                    if r.kind == CHILD and r.seq not in taken and r.name not in awaited
                ]
                if orphans or self.acc_dirty:
                    self.acc[0].extend(orphans)
                    yield from self._flush()
                    continue
                return

    def _resolve_next(self) -> Steps:
        """Resolve the earliest available event for the current wait; False if none.

        While resolutions only feed a gather (no workflow code runs), every other available event
        is taken in the same pass, in the same order: a gather of n children costs O(n log n).
        """
        wait = self.wait
        assert wait is not None
        if not (self.inbox or self.fired or self.done_procs):
            return False  # nothing has arrived that could resolve it
        # The pending arms by what resolves them: looking each row's arm up by a scan would cost
        # n*n for a gather of n children.
        by_signal: dict[str, Arm] = {}
        by_child: dict[str, Arm] = {}
        by_timer: dict[int, Arm] = {}
        by_proc: dict[str, Arm] = {}
        for a in wait.arms:
            if a.done:
                continue
            if a.kind == "signal":
                by_signal.setdefault(a.target, a)  # the first pending arm of that name
            elif a.kind == "child" and a.child_id is not None:
                by_child[a.child_id] = a
            elif a.kind == "timer" and a.timer_id is not None:
                by_timer[a.timer_id] = a
            elif a.kind == "procedure" and a.proc_key is not None:
                by_proc[a.proc_key] = a
        # (time, order, tiebreak, kind, row, arm): earliest first, as they happened.
        cands: list[tuple[float, int, int, str, Any, Arm]] = []
        taken: set[int] = set()
        acc_inbox, acc_timers, acc_procs = set(self.acc[0]), set(self.acc[1]), set(self.acc[2])
        for r in self.inbox:
            if r.seq in acc_inbox:
                continue
            if r.kind == SIGNAL:
                arm = by_signal.get(r.name)
                if arm is not None and arm.index not in taken:
                    taken.add(arm.index)
                    cands.append((r.created_at, r.seq, len(cands), "inbox", r, arm))
            elif r.kind == CHILD:
                arm = by_child.get(r.name)
                if arm is not None:
                    cands.append((r.created_at, r.seq, len(cands), "inbox", r, arm))
        for tid, row in self.fired.items():
            if tid in acc_timers:
                continue
            arm = by_timer.get(tid)
            if arm is not None:
                cands.append((row.due_at, tid, len(cands), "timer", row, arm))
        for key, done in self.done_procs.items():
            if key in acc_procs:
                continue
            arm = by_proc.get(key)
            if arm is not None:
                cands.append((float("-inf"), 0, len(cands), "proc", done, arm))
        if not cands:
            return False
        cands.sort(key=lambda c: c[:3])
        for _t, _o, _n, kind, ref, arm in cands:
            if arm.done:
                continue
            if (yield from self._take(wait, kind, ref, arm)):
                return True  # workflow code ran: the wait is a new one
        return True

    def _take(self, wait: Wait, kind: str, ref: Any, arm: Arm) -> Steps:
        """Resolve ``arm`` with the event ``ref``; True if that resumed the workflow."""
        consume_inbox: list[int] = []
        consume_timers: list[int] = []
        consume_procs: list[str] = []
        if kind == "inbox":
            row: InboxRow = ref
            consume_inbox.append(row.seq)
            if row.kind == SIGNAL:
                cause = _named_cause("signal", row.name)
                res = resolve_arm(wait, arm, ok=True, value=loads(row.payload))
            else:
                outcome = loads(row.payload)
                if outcome[0] == "ok":
                    cause = ("child", f',"child":{json.dumps(row.name)},"outcome":"completed"')
                    res = resolve_arm(wait, arm, ok=True, value=outcome[1])
                else:
                    info = outcome[1]
                    ended = "cancelled" if info.get("cancelled") else "failed"
                    cause = ("child", f',"child":{json.dumps(row.name)},"outcome":"{ended}"')
                    err: WorkflowError = ChildFailed(
                        f"child workflow {row.name!r} ({arm.target}) "
                        + ("was cancelled" if info.get("cancelled") else f"failed: {info['type']}: {info['message']}"),
                        child_id=row.name,
                        child_type=arm.target,
                        error_type=info["type"],
                        error_message=info["message"],
                        traceback=info.get("traceback"),
                    )
                    res = resolve_arm(wait, arm, ok=False, error=err)
        elif kind == "timer":
            consume_timers.append(ref.id)
            cause = _named_cause("timer", arm.target)
            res = resolve_arm(wait, arm, ok=True, value=None)
        else:
            done: ProcedureDone = ref
            consume_procs.append(done.key)
            called = f',"function":{_name(arm.target)},"attempts":{int(done.attempts)}'
            if done.ok:
                cause = ("procedure", called + ',"ok":true')
                res = resolve_arm(wait, arm, ok=True, value=done.value)
            else:
                info = done.error or {}
                cause = ("procedure", called + ',"ok":false,"error":' + _text(info.get("type")))
                err = ProcedureFailed(
                    f"procedure {arm.target} failed after {done.attempts} attempt(s): "
                    f"{info.get('type')}: {info.get('message')}",
                    procedure=arm.target,
                    attempts=done.attempts,
                    error_type=info.get("type"),
                    error_message=info.get("message"),
                    traceback=info.get("traceback"),
                )
                res = resolve_arm(wait, arm, ok=False, error=err)
        yield from self._apply(res, consume_inbox, consume_timers, consume_procs, cause)
        return res.resume

    def _flush(self) -> Steps:
        """Commit the gather results taken so far (without running workflow code)."""
        ci, ct, cp = self.acc
        dirty, self.acc, self.acc_dirty = self.acc_dirty, ([], [], []), False
        if dirty or ci or ct or cp:
            yield from self._commit_wait_only(consume_inbox=ci, consume_timers=ct, consume_procs=cp)

    def _apply(
        self, res: Resolution, consume_inbox: list[int], consume_timers: list[int], consume_procs: list[str],
        cause: tuple[str, str],
    ) -> Steps:
        if not res.resume:
            # A gather arm resolved: take every other available one before committing, so a
            # hundred children finishing together cost one commit, not a hundred.
            self.acc[0].extend(consume_inbox)
            self.acc[1].extend(consume_timers)
            self.acc[2].extend(consume_procs)
            self.acc_dirty = True
            return None
        acc_i, acc_t, acc_p = self.acc
        if acc_i or acc_t or acc_p:
            self.acc = ([], [], [])
            consume_inbox = acc_i + list(consume_inbox)
            consume_timers = acc_t + list(consume_timers)
            consume_procs = acc_p + list(consume_procs)
            # The gather took the others in this step, before the one that resumed it.
            cause = (cause[0], cause[1] + _taken(consume_inbox, consume_timers, consume_procs))
        self.acc_dirty = False
        if res.resume:
            if res.error is not None:
                yield from self._run(throw=res.error, consume_inbox=consume_inbox, consume_timers=consume_timers,
                          consume_procs=consume_procs, losers=res.losers, cause=cause)
            else:
                yield from self._run(send=res.value, consume_inbox=consume_inbox, consume_timers=consume_timers,
                          consume_procs=consume_procs, losers=res.losers, cause=cause)

    # -- steps ----------------------------------------------------------------------------------
    def _base_write(self, consume_inbox: list[int], consume_timers: list[int], consume_procs: list[str]) -> StepWrite:
        return StepWrite(
            workflow_id=self.id,
            step_seq=self.seq + 1,
            updated_at=self.rt.clock.now(),
            consume_inbox=list(consume_inbox),
            consume_timers=list(consume_timers),
            consume_procedures=list(consume_procs),
            create=self.creating.seed[0] if self.creating is not None else None,  # type: ignore[index]
        )

    def _note(self, sw: StepWrite, cause: tuple[str, str]) -> None:
        """Describe this step in the row's newest steps (``recent_steps``): what woke it.

        ``cause`` is the event's name and its detail's other fields, as JSON text after the
        step's number. The lines are kept as they were stored; the new text is the actor's once
        the step commits (``_commit``).
        """
        # The time in whole milliseconds: a float's shortest repr costs four times an int's.
        line = f'[{int(sw.updated_at * 1000)},"{cause[0]}",{{"step":{sw.step_seq}{cause[1]}}}]'
        text = self.recent
        if not text:
            sw.recent = line
        elif self.recent_count < RECENT_STEPS:
            sw.recent = text + "\n" + line
        else:
            sw.recent = text[text.index("\n") + 1:] + "\n" + line

    def _disarm(self, sw: StepWrite, losers: list[Arm], reason: str) -> None:
        for a in losers:
            if a.kind == "timer" and a.timer_id is not None:
                sw.cancel_timers.append(a.timer_id)
            elif a.kind == "procedure" and a.proc_key is not None:
                sw.cancel_procedures.append(a.proc_key)
            elif a.kind == "child" and a.child_id is not None and not a.detached:
                sw.signals.append(OutSignal(a.child_id, "cancel", dumps(reason), CANCEL))

    def _commit_wait_only(self, consume_inbox: list[int] = (), consume_timers: list[int] = (), consume_procs: list[str] = ()) -> Steps:  # type: ignore[assignment]
        """Commit consumption and the updated wait without running workflow code (gather)."""
        sw = self._base_write(list(consume_inbox), list(consume_timers), list(consume_procs))
        self._note(sw, ("gather", _taken(sw.consume_inbox, sw.consume_timers, sw.consume_procedures)))
        assert self.wait is not None
        packed, sw.waiting_on, sw.wait_signals = stored_forms(self.wait)
        sw.continuation = dumps(envelope(self.cont_blob, packed))
        sw.fingerprint = self.cont.fingerprint
        yield from self._commit(sw)
        self.unsettled = None

    def _finish_without_running(self, exc: BaseException, consume: list[int], cause: tuple[str, str]) -> Steps:
        sw = self._base_write(consume, [], [])
        self._note(sw, cause)
        yield from self._finish(sw, Raised(exc), [])

    def _run(
        self,
        *,
        first: bool = False,
        send: Any = None,
        throw: BaseException | None = None,
        consume_inbox: list[int] = (),  # type: ignore[assignment]
        consume_timers: list[int] = (),  # type: ignore[assignment]
        consume_procs: list[str] = (),  # type: ignore[assignment]
        losers: list[Arm] = (),  # type: ignore[assignment]
        cause: tuple[str, str],
    ) -> Steps:
        sw = self._base_write(consume_inbox, consume_timers, consume_procs)
        self._note(sw, cause)
        if losers:
            self._disarm(sw, list(losers), "the select that spawned it was won by another arm" if not isinstance(throw, Cancelled) else (str(throw) or "parent cancelled"))
        ctx = StepContext(
            workflow_id=self.id,
            workflow_type=self.type,
            parent_id=self.parent_id,
            now=self.rt.clock.now(),
            test_mode=self.test_mode,
        )
        with ctx.active():
            result = step(self.cont, throw=throw) if throw is not None else (
                step(self.cont) if first else step(self.cont, send=send)
            )
            # Building the new wait can fail (a child's arguments do not bind): raise it at the await.
            while isinstance(result, Suspended):
                try:
                    new_wait, children = self._prepare_wait(result, sw, ctx.now)
                    break
                except Exception as e:
                    result = step(self.cont, throw=e)
        try:
            self._apply_effects(sw, ctx)
        except Exception as e:
            result = Raised(e)
        if isinstance(result, Suspended):
            try:
                blob = checkpoint(self.cont)
            except CheckpointError as e:
                self.log.error("workflow_checkpoint_failed", error=str(e))
                sw = self._base_write(list(consume_inbox), list(consume_timers), list(consume_procs))
                self._note(sw, cause)
                yield from self._finish(sw, Raised(e), new_wait.pending(), keep_continuation=True)
                return
            new_wait.location = self.cont.location()
            sw.new_workflows.extend(seed[0] for seed in children.values())
            packed, sw.waiting_on, sw.wait_signals = stored_forms(new_wait, fresh=True)
            sw.continuation = dumps(envelope(blob, packed))
            sw.fingerprint = self.cont.fingerprint
            ack = yield from self._commit(sw)
            self.cont_blob = blob
            self.wait = new_wait
            rows = []
            if ack.timer_ids:
                timer_arms = [a for a in new_wait.arms if a.kind == "timer"]
                for arm, tid in zip(timer_arms, ack.timer_ids, strict=False):
                    arm.timer_id = tid
                    rows.append(TimerRow(tid, self.id, arm.target, arm.due_at or 0.0))
            self.rt.after_commit(self.id, sw, ack, rows, self.test_mode, children, self.dispatched)
            self.unsettled = None
            return
        yield from self._finish(sw, result, [])

    def _prepare_wait(
        self, result: Suspended, sw: StepWrite, now: float
    ) -> tuple[Wait, dict[str, tuple[NewWorkflow, Any, bytes]]]:
        """The new wait, and the children it spawns by id (record, continuation, checkpoint)."""
        seq = self.seq + 1
        wait = build_wait(result.command, workflow_id=self.id, step_seq=seq, now=now)
        cmds = getattr(result.command, "commands", None) or (result.command,)
        children: dict[str, tuple[NewWorkflow, Any, bytes]] = {}
        timers: list[NewTimer] = []
        procs: list[NewProcedure] = []
        for arm, cmd in zip(wait.arms, cmds, strict=False):
            if arm.kind == "child" and cmd.id is not None and arm.child_id is not None and (
                arm.child_id in children or self.rt.store.load_workflow(arm.child_id) is not None
            ):
                # Raised at the await, where the workflow can catch it; the id stays the other's.
                raise WorkflowError(
                    f"spawn({arm.target}, id={arm.child_id!r}) in workflow {self.id!r}: a workflow "
                    f"with that id exists already, so no child was started. Choose an id no "
                    f"workflow has, or leave id=None for a generated one."
                )
            if arm.kind == "timer":
                assert arm.due_at is not None
                timers.append(NewTimer(arm.target, arm.due_at))
            elif arm.kind == "procedure":
                assert arm.proc_key is not None
                check_findable("procedure", arm.target)  # raised at the await
                procs.append(NewProcedure(arm.proc_key, arm.target, pack_call(cmd.args, cmd.kwargs, cmd.timeout, cmd.retry), 0.0))
            elif arm.kind == "child":
                assert arm.child_id is not None
                child_wf = resolve("workflow", arm.target)
                ccont = child_wf.start(*cmd.args)
                cblob = checkpoint(ccont)
                new = NewWorkflow(
                    id=arm.child_id,
                    type=arm.target,
                    continuation=dumps({"cont": cblob, "wait": None}),
                    fingerprint=ccont.fingerprint,
                    parent_id=self.id,
                    detached=arm.detached,
                    test_mode=self.test_mode,
                    waiting_on=None,
                    created_at=now,
                )
                children[new.id] = (new, ccont, cblob)
        sw.new_timers = timers
        sw.new_procedures = procs
        return wait, children

    def _apply_effects(self, sw: StepWrite, ctx: StepContext) -> None:
        for eff in ctx.effects:
            if isinstance(eff, ReducerCall):
                fn = resolve("reducer", eff.function)
                sw.reducers.append(_bind_reducer(fn, eff.args, eff.kwargs))
            elif isinstance(eff, Send):
                sw.signals.append(OutSignal(eff.workflow_id, eff.name, dumps(eff.payload), SIGNAL))
            elif isinstance(eff, Broadcast):
                sw.broadcasts.append(OutBroadcast(eff.name, filter_key(eff.filter_value), dumps(eff.payload)))
            elif isinstance(eff, Subscribe):
                sw.subscribe.append((eff.name, filter_key(eff.filter_value)))
            elif isinstance(eff, Unsubscribe):
                sw.unsubscribe.append((eff.name, filter_key(eff.filter_value)))

    def _finish(self, sw: StepWrite, result: Finished | Raised, losers: list[Arm], keep_continuation: bool = False) -> Steps:
        self._disarm(sw, losers, "parent ended")
        if isinstance(result, Finished):
            try:
                sw.result = dumps(result.value)
            except Exception as e:
                result = Raised(WorkflowError(
                    f"workflow {self.id!r} returned a value that cannot be stored "
                    f"({type(result.value).__name__}: {e}); return plain picklable data"
                ))
        if isinstance(result, Finished):
            sw.status = COMPLETED
            outcome: tuple[str, Any] = ("ok", result.value)
            sw.history.append(("completed", json.dumps({"result": _short(result.value)})))
        else:
            exc = result.exception
            info = error_info(exc)
            if isinstance(exc, Cancelled):
                sw.status = CANCELLED
                info["cancelled"] = True
                sw.history.append(("cancelled", json.dumps({"reason": exc.reason})))
            else:
                sw.status = FAILED
                sw.history.append(("failed", json.dumps({"type": info["type"], "message": info["message"]})))
            sw.error = json.dumps(info)
            outcome = ("err", info)
        if keep_continuation:
            sw.continuation = dumps(envelope(self.cont_blob, dumps(self.wait) if self.wait else None))
        if self.parent_id is not None:
            sw.signals.append(OutSignal(self.parent_id, self.id, dumps(outcome), CHILD))
        ack = yield from self._commit(sw)
        self.finished = True
        # Not through self.log: binding a logger costs more than the event, once per workflow.
        # A workflow that failed for good is an error; a completed or cancelled one, lifecycle.
        (log.error if sw.status == FAILED else log.info)(
            "workflow_" + sw.status,
            workflow_id=self.id,
            workflow_type=self.type,
            **({"error": outcome[1]["message"]} if outcome[0] == "err" else {}),
        )
        self.rt.after_commit(self.id, sw, ack, [], self.test_mode, None, self.dispatched)
        self.rt.finished(self.id)
        self.unsettled = None

    def _commit(self, sw: StepWrite) -> Steps:
        self.unsettled, self.dispatched = sw, set()
        if self.fire_requests:
            sw.consume_external = [
                self.fire_requests[t] for t in (*sw.consume_timers, *sw.cancel_timers)
                if t in self.fire_requests
            ]
        try:
            # help: with no batch running, this thread commits it (no hand-off to the writer and
            # back); while one runs, the write is queued and an actor thread pauses (``_drive``).
            ack = yield self.rt.store.submit_step(sw, help=True)
        except Exception as e:
            self.unsettled = None  # not written (or a fault: the restart reloads the store)
            if sw.create is not None and isinstance(e, WorkflowExists) and e.workflow_id == self.id:
                self._settle_start(False)
                raise _NotCreated(self.id) from e
            raise _RuntimeFault(f"step {sw.step_seq} of workflow {self.id!r} did not commit: {e!r}") from e
        if sw.create is not None:
            self._settle_start(True)
        self.seq = sw.step_seq
        log.debug("step_committed", workflow_id=self.id, workflow_type=self.type, step=sw.step_seq, status=sw.status)
        if sw.recent is not None:
            if self.recent_count < RECENT_STEPS:
                self.recent_count += 1
            self.recent = sw.recent
        consumed = set(sw.consume_inbox) if sw.consume_inbox else None
        if consumed:
            self.inbox = [r for r in self.inbox if r.seq not in consumed]
            self.consumed_seqs |= consumed
            self.consumed_order.extend(consumed)
            # Bounded: no more Wakes can be queued than the inbox holds signals.
            while len(self.consumed_order) > CONSUMED_MEMORY:
                self.consumed_seqs.discard(self.consumed_order.popleft())
        for t in sw.consume_timers:
            self.fired.pop(t, None)
        for t in sw.cancel_timers:
            self.fired.pop(t, None)
        for seq in sw.consume_external:
            self.fire_requests_done.append(seq)
        if sw.consume_external:
            self.fire_requests = {t: s for t, s in self.fire_requests.items() if s not in sw.consume_external}
        for k in sw.consume_procedures:
            self.done_procs.pop(k, None)
        for k in sw.cancel_procedures:
            self.done_procs.pop(k, None)
        return ack


def _blocked_reason(rec: Any) -> str | None:
    """Why the stored record shows the workflow as blocked, or None (parsed only if it may)."""
    if not rec.waiting_on or '"blocked"' not in rec.waiting_on:
        return None
    reason: str | None = json.loads(rec.waiting_on).get("blocked")
    return reason


def _missing_code(e: BaseException) -> str | None:
    """Why ``e`` is code this process lacks (not a fault that a restart may cure), or None."""
    seen = 0
    while e is not None and seen < 8:
        if isinstance(e, UnknownWorkflowType):
            return str(e)
        if isinstance(e, MalformedPayload) and isinstance(e.__cause__, (ImportError, AttributeError)):
            return (
                f"a message or result it takes refers to code that cannot be found "
                f"({type(e.__cause__).__name__}: {e.__cause__}). Make that module importable (on "
                f"sys.path) in the process that opens the database."
            )
        e, seen = e.__cause__, seen + 1  # type: ignore[assignment]
    return None


def _bind_reducer(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    def run(db: Any) -> None:
        fn(db, *args, **kwargs)

    # Errors name the reducer by its own module:qualname, not this wrapper's.
    functools.update_wrapper(run, fn)
    return run


# Names as JSON strings, and the causes of steps woken by a signal or a timer, for steps'
# descriptions: a loop awaiting the same signal builds its step's cause once.
_name = functools.lru_cache(maxsize=4096)(json.dumps)


@functools.lru_cache(maxsize=4096)
def _named_cause(event: str, name: str) -> tuple[str, str]:
    return (event, ',"name":' + json.dumps(name))


def _taken(*consumed: list[Any]) -> str:
    """A step's detail for the outcomes a gather took in it (inbox rows, timers, procedures)."""
    return f',"taken":{sum(map(len, consumed))}'


def _text(value: Any) -> str:
    """``value`` as a JSON string for a step's description (None stays null): text as it is,
    anything else as its repr, at most 200 characters."""
    if value is None:
        return "null"
    return json.dumps(_clip(value if isinstance(value, str) else repr(value)))


def _short(value: Any) -> str:
    return _clip(repr(value))


def _clip(text: str) -> str:
    return text if len(text) <= 200 else text[:197] + "..."
