"""The workflow actor: the I/O shell around one ``WorkflowInstance``.

Its mailbox receives signals, timer ticks, procedure replies and child outcomes (each durable in the
store before it is sent, except a signal handed over by ``ref.signal()``, which the actor makes
durable itself). The actor loads the workflow, offers the instance what has arrived, turns the
instance's step outcome into one ``StepWrite``, hands it to the store, and only after the commit
carries out what the step asked for (through its ``Host``). The rules of what an arrival resumes
and what it disarms are the instance's (``workflows/_instance.py``), not the actor's.

The handling of a message is a generator that yields each commit's ``Promise`` and is sent its
acknowledgement back: the actor pauses there (``pause_until``), and its dispatcher thread runs
other actors until the writer has committed, so a hundred children finishing together reach the
writer together.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import enum
import functools
import json
import threading
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from persistence import (
    CANCEL,
    CHILD,
    FAILED,
    RECENT_STEPS,
    REQUEST,
    RUNNING,
    SIGNAL,
    Fenced,
    InboxRow,
    MalformedPayload,
    NewProcedure,
    NewTimer,
    OutBroadcast,
    OutSignal,
    Promise,
    StepAck,
    StepWrite,
    StorageUnavailable,
    TimerRow,
    WorkflowExists,
    WorkflowRecord,
    dumps,
    loads,
)
from workflows import Cancelled
from workflows._commands import Procedure
from workflows._compiler import checkpoint, restore_upgrading
from workflows._compiler._upgrade import Upgrade
from workflows._context import Broadcast, ReducerCall, Send, Subscribe, Unsubscribe
from workflows._errors import CheckpointError, UnknownWorkflowType, VersionMismatch
from workflows._instance import Arrival, Decision, StepOutcome, Wait, WorkflowInstance
from workflows._registry import resolve
from workflows._step import Finished, Raised

from . import _history, _replies, _writes
from ._errors import TimerNotArmed
from ._host import Host
from ._inbox import Inbox
from ._outcomes import Outcome
from ._pool import PooledActor
from ._procedures import ProcedureDone, pack_call, record_outcome
from ._wait import pack_step, pack_wait, stored_forms, unpack_step

E = TypeVar("E", bound=BaseException)


# Inbox rows consumed since the load that the actor remembers (a Wake can still be queued for one).
CONSUMED_MEMORY = 50_000

# What the handling of a message is: a generator that yields each commit's promise and is sent its
# acknowledgement (or has its error thrown in).
Steps = Generator[Promise[Any], Any, Any]

# A workflow created by this process: its record, live continuation and first checkpoint.
Seed = tuple[Any, Any, bytes]


# -- messages -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Kick:
    """Load the workflow (if needed) and do whatever work it has.

    ``seed``: the state of a workflow just created here (an actor whose first message this is
    starts from it instead of reading back what was committed a moment ago). ``created``: the
    record is not written yet; the first step inserts it, in its own commit, and then this gets
    True (False: the id was taken meanwhile, and nothing was written). ``reload``: read the
    workflow from the store even if it is loaded (a cluster's node that took its shard over: what
    it held in memory is stale). ``handled``: answered once the actor is done with this message
    (every step it could take committed), for a caller that judges what the workflow did with it.
    """

    seed: Seed | None = None
    created: Promise[bool] | None = None
    reload: bool = False
    handled: Promise[None] | None = None


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

    If the workflow's instance takes it now, the step that consumes it is its only write: it never
    needs an inbox row. Otherwise it is appended to the inbox. Either way ``reply`` resolves only
    after the commit.
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
    message: str


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
# The order of a signal handed over directly, after every inbox row of the same time.
_DIRECT_ORDER = 1 << 62


def filter_key(value: Any) -> str:
    """Canonical JSON of a subscription filter value: equal values, one text (``3`` and ``3.0``
    too, as JSON has one kind of number; ``True`` and ``1`` stay apart, as in JSON)."""
    try:
        return json.dumps(_same_numbers(value), sort_keys=True, separators=(",", ":"))
    except TypeError as e:
        raise TypeError(
            f"subscription filter values must be JSON values (str, int, float, bool, None, lists, "
            f"dicts), got {value!r}"
        ) from e


def _same_numbers(value: Any) -> Any:
    """``value`` with every float that is a whole number as its int."""
    t = type(value)
    if t is float:
        return int(value) if value.is_integer() else value
    if t is list or t is tuple:
        return [_same_numbers(v) for v in value]
    if t is dict:
        return {k: _same_numbers(v) for k, v in value.items()}
    return value


class RuntimeFault(Exception):
    """A fault outside workflow code (a commit, a reducer, serialization): restart the actor."""


class EscalationFailed(Exception):
    """Recording a workflow's failure after too many restarts failed itself."""


class _NotCreated(Exception):
    """The first step of a workflow being started found its id taken: it wrote nothing."""


class Life(enum.Enum):
    """What an actor knows of its workflow: one state, not a flag per fact."""

    NEW = "new"  # nothing read or seeded yet
    STALE = "stale"  # what it held is suspect (after a fault): the next message reads the store
    RUNNING = "running"  # loaded, and it runs
    BLOCKED = "blocked"  # loaded, and held: its code changed or is missing; it takes only a cancel
    FINISHED = "finished"  # loaded, and it has ended
    ABSENT = "absent"  # loaded: the store has no workflow of this id


# (tuples: ``in`` finds a member by identity, where a set would call the Enum's __hash__, a
# Python function, at every message)
_UNREAD = (Life.NEW, Life.STALE)
_ENDED = (Life.FINISHED, Life.ABSENT)


class WorkflowActor(PooledActor):
    """Runs one workflow's steps, one at a time (on the runtime's shared actor threads)."""

    def __init__(self, host: Host, workflow_id: str) -> None:
        super().__init__(host.dispatcher)
        self.host = host
        self.id = workflow_id
        self.type = ""
        self.life = Life.NEW
        self.test_mode = False
        self.instance: WorkflowInstance | None = None
        # The start whose first step creates the record, until that step commits.
        self.creating: Kick | None = None
        self.step_started = 0.0  # perf_counter at the start of the step under way (metrics)
        self.cont_blob = b""  # the last committed checkpoint
        self.recent: str | None = None
        self.recent_count = 0
        # `wf fire-timer` requests carried out by a committed step (their seqs, the newest few):
        # the request may be read again before that commit, and must not fire the next timer.
        self.fire_requests_done: collections.deque[int] = collections.deque(maxlen=64)
        # Procedure outcomes not written yet when a write failed for a reason of the storage.
        self.held: dict[str, ProcedureDone] = {}
        # The sender of the signal the running step consumes: answered by that step's commit.
        self.answer: DirectSignal | None = None
        # (kind, name) of the signals and asks never awaited that were logged: once each while
        # the workflow is in memory, not once per signal (a typo in a loop sends thousands).
        self.warned: set[tuple[str, str]] = set()
        self._reset()

    def _reset(self) -> None:
        self.inbox = Inbox()
        self.consumed: set[int] = set()
        self.fired: dict[int, TimerRow] = {}
        self.fire_requests: dict[int, int] = {}  # fired timer id -> its `wf fire-timer` request
        self.done_procs: dict[str, ProcedureDone] = {}
        self.deferred = False  # events taken from the mailbox but not resolved yet

    def _suspect(self) -> None:
        """What is in memory may be wrong (a fault): the next message reads the store."""
        if self.life is not Life.NEW:
            self.life = Life.STALE

    @property
    def log(self) -> Any:
        return self.host.workflow_log.bind(workflow_id=self.id, workflow_type=self.type)

    def _reading(self) -> contextlib.AbstractContextManager[None]:
        """Around a read of the store: a round trip to a server gives the engine's stepping role
        up meanwhile (``Dispatcher.blocking``); a read of a local file is shorter than that."""
        return self._dispatcher.blocking() if self.host.store.remote_reads() else contextlib.nullcontext()

    @property
    def wait(self) -> Wait | None:
        return self.instance.wait if self.instance is not None else None

    # -- pykka hooks --------------------------------------------------------------------------
    def on_receive(self, message: Any) -> Any:
        if type(message) is DirectSignal and self.life is Life.RUNNING:
            steps = self._signal(message)  # (what ``_handle`` comes to for it, one layer less)
        else:
            steps = self._handle(message)
        self._drive(steps, message, None, None)
        return None

    def on_failure(self, exception_type: Any, exception_value: Any, traceback: Any) -> None:
        self.host.fault(self.id, exception_value, self.type or None)

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
                if not promise.done() and not (self._dispatcher.commit_here() and promise.done()):
                    paused = True
                    self.pause_until(promise, functools.partial(self._resume_after, steps, message, promise))
                    return
                value, error = promise.outcome()
        except Exception as e:
            self._fault(message, e)
        except (SystemExit, KeyboardInterrupt) as e:
            if isinstance(e, KeyboardInterrupt) and threading.current_thread() is threading.main_thread():
                raise  # Ctrl-C: the program is interrupted
            # Code the engine ran for this workflow ended itself (a value unpickled as it is
            # taken, whose __setstate__ calls sys.exit()): a runtime fault of this workflow,
            # restarted and failed as any, not the end of its actor with its callers waiting.
            fault = RuntimeError(f"{type(e).__name__} raised by code run for this workflow: {e}")
            fault.__cause__ = e
            self._fault(message, fault)
        finally:
            if not paused:
                # An ended workflow's actor stops at the end of its last message, on its own
                # thread: no stop message later, nor the eviction of an idle actor by a caller.
                self.host.message_done(self.id, self if self.life is Life.FINISHED else None)
                if type(message) is Kick and message.handled is not None:
                    message.handled.answer(None)

    def _resume_after(self, steps: Steps, message: Any, promise: Promise[Any]) -> None:
        value, error = promise.outcome()
        self._drive(steps, message, value, error)

    # -- faults -------------------------------------------------------------------------------
    def _fault(self, message: Any, e: Exception) -> None:
        self._suspect()
        if isinstance(e, _NotCreated) or not self._created_alone():
            # Nothing was written and this id is another workflow's: forget the seed, so that a
            # next message loads that workflow from the store. Not a fault.
            self.life = Life.NEW
            return
        if isinstance(message, FireTimer) and not message.reply.done():
            message.reply.set_exception(e)
        if isinstance(message, DirectSignal) and not message.reply.done():
            self._append_signal(message)  # or its sender learns it was not taken
        held = {k: d for k, d in self.done_procs.items() if not d.durable}
        if isinstance(message, ProcedureDone) and not message.durable:
            held[message.key] = message
        fence = _cause_of(e, Fenced)
        if fence is not None:
            # The shard is another node's now: what this actor held goes to the store (a
            # procedure's outcome to its row, where the new owner finds it), and it stops.
            for done in held.values():
                self._record_outcome(done)
            self.host.fenced(self.id, fence)
            return
        if _cause_of(e, StorageUnavailable) is not None:  # storage that may pass, not the workflow
            # Not the workflow's fault: everything it was sent is in the store, or held here
            # (outcomes not written yet, kept for the next load). Try again after a backoff.
            self.held = held
            self.host.storage_fault(self.id, e, message if isinstance(message, Escalate) else Kick())
            return
        # Outcomes held only in memory go to their rows: the restart then finds them in the store.
        for done in held.values():
            if not done.durable:
                self._record_outcome(done)
        why = _missing_code(e)
        if why is not None:
            self._hold_for_code(why)
            return
        self.host.fault(self.id, e, self.type or None)

    def _hold_for_code(self, why: str) -> None:
        """A step needs code this process lacks (a class of a payload it takes): hold the
        workflow as blocked, as when its own code is missing, instead of restarting it until it
        fails. Its next load (a restart with the code) tries the step again."""
        try:
            rec = self._load()
            if rec is None or self.life is not Life.RUNNING:
                return
            self.life = Life.BLOCKED
            self.log.error("workflow_code_missing", error=why)
            self._record_blocked(rec, why, "code_missing")
        except Exception as e:
            self._suspect()
            self.host.fault(self.id, e, self.type or None)

    def _created_alone(self) -> bool:
        """After a first step of a start failed (not for its id): write the record alone.

        The start is then what it would have been without the first step in its transaction, and
        the failure is a fault of that first step: restarted, with backoff, up to the intensity.
        False if the id was taken meanwhile (nothing of this workflow exists).
        """
        creating = self.creating
        if creating is None:
            return True
        assert creating.seed is not None
        try:
            with self._dispatcher.blocking():
                created = self.host.store.create_workflow(creating.seed[0])
        except Exception as e:  # the record cannot be written either: the start fails
            self.creating = None
            assert creating.created is not None
            creating.created.set_exception(e)
            return False
        self._settle_start(created)
        return created

    def _settle_start(self, created: bool) -> None:
        creating, self.creating = self.creating, None
        assert creating is not None and creating.created is not None
        if created:
            self.host.workflow_log.info("workflow_started", workflow_id=self.id, workflow_type=self.type, test_mode=self.test_mode)
        _answer(creating.created, created)

    # -- loading ------------------------------------------------------------------------------
    def _load_seed(self, seed: Seed) -> None:
        """Start from a workflow this process has just created: nothing stepped, nothing queued."""
        new, cont, blob = seed
        self._reset()
        self.life = Life.RUNNING
        self.type = new.type
        self.test_mode = new.test_mode
        self.recent, self.recent_count = None, 0
        self.cont_blob = blob
        self.instance = WorkflowInstance(
            cont, None, step_seq=0, workflow_id=self.id, workflow_type=new.type,
            parent_id=new.parent_id, test_mode=new.test_mode, scheduled_at=new.scheduled_at,
        )

    def _scheduled_at(self) -> float | None:
        """The tick of a run a schedule started (its id is ``schedule@tick``), read at its load."""
        if "@" not in self.id:
            return None
        with self._reading():
            return self.host.store.scheduled_tick(self.id)

    def _load(self) -> WorkflowRecord | None:
        """Read the workflow's state from the store; the record (None: no workflow of this id)."""
        with self._reading():
            rec, inbox, timer_rows, proc_rows = self.host.store.load_state(self.id)
        self._reset()
        self.instance = None
        if rec is None or rec.status != RUNNING:
            self.life = Life.ABSENT if rec is None else Life.FINISHED
            return rec
        self.life = Life.RUNNING
        self.type = rec.type
        self.test_mode = rec.test_mode
        recent = rec.recent_steps or None
        count = recent.count("\n") + 1 if recent else 0
        if recent and count > _history.ROW_MOST:  # edited by hand: the newest are kept
            recent = "\n".join(recent.split("\n")[-_history.ROW_MOST:])
            count = _history.ROW_MOST
        self.recent, self.recent_count = recent, count
        assert rec.continuation is not None
        self.cont_blob, wait = unpack_step(rec.continuation)
        self.inbox = Inbox(inbox)
        try:
            # A continuation made by older code moves onto the loaded code when that is safe
            # (the same await, the same constructs around it, no local live there that was not
            # live in the old code) or an upgrade function says how; else it is held below.
            cont, upgrade = restore_upgrading(self.cont_blob)
            new_blob = _upgraded_checkpoint(cont, upgrade) if upgrade is not None else None
        except (VersionMismatch, UnknownWorkflowType) as e:
            # Never resume a stale continuation, and never fail a workflow because this process
            # lacks its code (a script run from the wrong directory, a module renamed in a
            # deploy): keep it as it is, say so where users look, and take only a cancel. The
            # next load (a restart with the right code) resumes it.
            self.instance = WorkflowInstance(None, wait, step_seq=rec.step_seq, workflow_id=self.id,
                                             workflow_type=rec.type, parent_id=rec.parent_id, test_mode=rec.test_mode)
            self.life = Life.BLOCKED
            missing = isinstance(e, UnknownWorkflowType)
            self.log.error("workflow_code_missing" if missing else "workflow_version_mismatch", error=str(e))
            self._record_blocked(rec, str(e), "code_missing" if missing else "version_mismatch")
            return rec
        self.instance = WorkflowInstance(
            cont, wait, step_seq=rec.step_seq, workflow_id=self.id, workflow_type=rec.type,
            parent_id=rec.parent_id, test_mode=rec.test_mode, scheduled_at=self._scheduled_at(),
        )
        if upgrade is not None:
            assert new_blob is not None
            self._record_upgraded(rec, new_blob, upgrade)
        elif wait is not None and _blocked_reason(rec) is not None:
            self._record_unblocked(rec)
        if wait is not None:
            # Timer ids are the store's: each row goes to the arm it was armed for, by its name
            # and due time (two arms alike in both are interchangeable), not by its place.
            rows_for: dict[tuple[str, float], list[TimerRow]] = {}
            for row in sorted(timer_rows, key=lambda r: r.id):
                rows_for.setdefault((row.name, row.due_at), []).append(row)
            for arm in wait.arms:
                if arm.kind != "timer" or arm.done:
                    continue
                same = rows_for.get((arm.target, arm.due_at or 0.0))
                if not same:
                    continue
                row = same.pop(0)
                arm.timer_id = row.id
                if not self.test_mode and row.due_at <= self.host.clock.now():
                    self.fired[row.id] = row
        for p in proc_rows:
            if p.status == "done":
                assert p.result is not None
                self.done_procs[p.key] = ProcedureDone(p.key, True, loads(p.result), None, p.attempts)
            elif p.status == "failed":
                self.done_procs[p.key] = ProcedureDone(p.key, False, None, json.loads(p.error or "{}"), p.attempts)
            elif p.key in self.held:
                self.done_procs[p.key] = self.held[p.key]
        self.held = {}
        return rec

    def _record_upgraded(self, rec: WorkflowRecord, blob: bytes, up: Upgrade) -> None:
        """Store the continuation moved onto the loaded code, with an ``upgraded`` history event,
        in one commit (killed before it, the next load does the same upgrade again)."""
        detail = up.detail()
        waiting = self.wait.describe() if self.wait is not None else rec.waiting_on
        sw = StepWrite(
            workflow_id=self.id,
            step_seq=rec.step_seq + 1,
            continuation=pack_step(blob, pack_wait(self.wait)),
            fingerprint=up.loaded,
            waiting_on=waiting,
            wait_signals=self.wait.signal_names() if self.wait else (),
            updated_at=self.host.clock.now(),
            history=[("upgraded", json.dumps(detail))],
        )
        with self._dispatcher.blocking():
            self.host.store.commit_step(sw, timeout=self.host.commit_timeout)
        assert self.instance is not None
        self.instance.step_seq = rec.step_seq + 1
        self.cont_blob = blob
        moved = [f for f in up.frames if f.how != "unchanged"]
        self.log.info(
            "workflow_upgraded",
            old_fingerprint=up.stored,
            new_fingerprint=up.loaded,
            point=moved[0].old.ident if moved and moved[0].old else None,
            how=",".join(sorted({f.how for f in moved})),
        )

    def _record_blocked(self, rec: WorkflowRecord, why: str, event: str) -> None:
        """Show why the workflow cannot run (a version mismatch, its code missing) in waiting_on
        and the history (once), keeping the checkpoint."""
        if _blocked_reason(rec) == why:
            return
        waiting = self.wait.description() if self.wait else {"mode": "one", "arms": []}
        waiting["blocked"] = why
        self._commit_waiting_on(rec, json.dumps(waiting), (event, json.dumps({"message": why})))

    def _record_unblocked(self, rec: WorkflowRecord) -> None:
        """A workflow shown as blocked loads again: show what it waits for, and that it runs."""
        assert self.wait is not None
        self._commit_waiting_on(rec, self.wait.describe(), ("resumed", json.dumps({"message": "its code loads again"})))
        self.log.info("workflow_unblocked")

    def _commit_waiting_on(self, rec: WorkflowRecord, waiting_on: str, event: tuple[str, str]) -> None:
        sw = StepWrite(
            workflow_id=self.id,
            step_seq=rec.step_seq + 1,
            waiting_on=waiting_on,
            wait_signals=self.wait.signal_names() if self.wait else (),
            updated_at=self.host.clock.now(),
            history=[event],
        )
        with self._dispatcher.blocking():
            self.host.store.commit_step(sw, timeout=self.host.commit_timeout)
        assert self.instance is not None
        self.instance.step_seq = rec.step_seq + 1

    # -- handling -----------------------------------------------------------------------------
    def _handle(self, message: Any) -> Steps:
        if isinstance(message, Escalate):
            yield from self._escalate(message)
            return
        if isinstance(message, Kick) and message.seed is not None:
            if message.created is not None:  # a start: its first step creates the record
                # Holds a running workflow of this id already. One that it holds finished may
                # have been deleted by retention since: the INSERT of the first step tells.
                if self.life is Life.RUNNING or self.life is Life.BLOCKED:
                    message.created.set_result(False)
                    return
                self.creating = message
                self._load_seed(message.seed)
                fresh = True
            elif self.life is Life.NEW:
                self._load_seed(message.seed)
                fresh = True
            elif self.life is Life.STALE or self.life in _ENDED:
                # An earlier look found nothing, or found the finished workflow that had the id
                # before retention deleted it: that look is stale.
                self._load()
                fresh = True
            else:
                fresh = False
        elif self.life in _UNREAD or (isinstance(message, Kick) and message.reload):
            self._load()
            fresh = True
        else:
            fresh = False
        if isinstance(message, DirectSignal):
            yield from self._signal(message)
            return
        if self.life is not Life.RUNNING:  # ended, absent or blocked
            if isinstance(message, ProcedureDone):
                self._record_outcome(message)
            if isinstance(message, FireTimer):
                message.reply.set_exception(TimerNotArmed(self.id, message.name, []))
            if self.life is Life.BLOCKED:
                if isinstance(message, Wake):
                    self._take_row(message, fresh)
                cancel = self.inbox.first_cancel()
                if cancel is not None:
                    yield from self._cancel_blocked(cancel)
            return
        if isinstance(message, Wake):
            self._take_row(message, fresh)
            if not fresh and message.row is not None and message.row.kind == SIGNAL:
                self._catch_up()
            if message.row is not None and message.row.kind in (SIGNAL, REQUEST):
                # (from `wf signal` or `wf ask`, another workflow's send, another node)
                self._warn_if_never_awaited(message.row.name, "signal" if message.row.kind == SIGNAL else "ask")
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
                pending = self.wait.pending() if self.wait else []
                message.reply.set_exception(TimerNotArmed(self.id, message.name, [a.name for a in pending if a.kind == "timer"]))
                return
            self.fired[arm.timer_id] = TimerRow(arm.timer_id, self.id, arm.target, arm.due_at or 0.0)
            if seq is not None:
                self.fire_requests[arm.timer_id] = seq
            message.reply.set_result(None)
        if isinstance(message, _EVENTS) and isinstance(self.actor_inbox.peek(), _EVENTS):
            # Another event is queued next (a hundred children's outcomes arrive as a hundred
            # wake-ups): take them all first, then decide and commit once.
            self.deferred = True
            return
        yield from self._pump()

    def _take_row(self, message: Wake, fresh: bool) -> None:
        """Keep the inbox in memory up to date with a ``Wake``."""
        row = message.row
        if row is None:
            if not fresh:
                with self._reading():
                    rows = self.host.store.inbox(self.id)
                self.inbox.merge(rows, self.consumed)
            return
        if fresh or row.seq in self.consumed:
            return  # read by the load, or queued behind the step that consumed it
        self.inbox.add(row)

    def _catch_up(self) -> None:
        """On a cluster's node that has peers: read the inbox rows other nodes appended that no
        wake-up has brought yet, so that a signal taken now never overtakes one that was durable
        before it was sent (arrival order)."""
        cluster = self.host.store.cluster()
        if cluster.alone() or self.life in _UNREAD:
            return
        with self._reading():
            rows = self.host.store.inbox(self.id)
        self.inbox.merge(rows, self.consumed)

    def _signal(self, message: DirectSignal) -> Steps:
        """A signal from ``ref.signal()``: consumed by the step it resumes, or kept in the inbox."""
        running = self.life is Life.RUNNING
        if running:
            self._catch_up()
        if not running or self.deferred:
            self._append_signal(message)  # a finished workflow's store says why it cannot take it
            if running and message.reply.exception() is None:
                yield from self._pump()
            return
        direct = Arrival(SIGNAL, message.name, message.created_at, _DIRECT_ORDER, True, _Encoded(message.payload), None, 0, message)
        decision = self._decide(direct)
        if decision is None or not _takes(decision, message):
            self._append_signal(message)
            if message.reply.exception() is None:
                yield from self._pump()
            return
        assert self.instance is not None
        before = self.instance.step_seq
        self.answer = message  # its step's commit answers the sender: durable from then on
        try:
            yield from self._carry(decision)
        except Exception as e:
            if self.instance.step_seq != before:
                _answer(message.reply, None)  # consumed by a step that committed: durable
            elif _maybe_committed(e):
                self._settle_consumed(message, before, e)
            raise  # otherwise the fault handling keeps it in the inbox (or tells the sender why not)
        finally:
            self.answer = None
        _answer(message.reply, None)
        yield from self._pump()

    def _settle_consumed(self, message: DirectSignal, before: int, e: Exception) -> None:
        """The step that consumed ``message`` may have committed (its COMMIT's outcome was not
        told): the stored step counter says whether it did. Committed: the sender is answered
        (the fault handling must not append the signal a second time). Not: left to the fault
        handling, which appends it. Not told either (the store is away): the sender is told
        that, and nothing is appended."""
        try:
            with self._reading():
                rec = self.host.store.load_workflow(self.id)
        except Exception:  # the store cannot say: neither answered nor appended
            message.reply.set_exception(e)
            return
        if rec is not None and rec.step_seq > before:
            _answer(message.reply, None)

    def _append_signal(self, message: DirectSignal) -> None:
        """Make a signal durable in the inbox and answer its sender (or tell it why not)."""
        if message.reply.done():
            return
        try:
            with self._dispatcher.blocking():
                d = self.host.store.append_inbox(self.id, SIGNAL, message.name, message.payload, at=message.created_at)
        except Exception as e:
            message.reply.set_exception(e)
            return
        if self.life is Life.RUNNING or self.life is Life.BLOCKED:
            self.inbox.add(InboxRow(d.seq, self.id, SIGNAL, message.name, message.payload, message.created_at))
            self._warn_if_never_awaited(message.name)
        message.reply.set_result(None)

    def _warn_if_never_awaited(self, name: str, what: str = "signal") -> None:
        # Only for a signal buffered, not one taken at once: a name the code never awaits stays
        # in the inbox for good (a typo, or a signal meant for another workflow).
        try:
            names = resolve("workflow", self.type).signal_names
        except Exception:  # the code is not here (a blocked workflow): nothing to compare with
            return
        if names is not None and name not in names and (what, name) not in self.warned:
            self.warned.add((what, name))
            self.log.warning(f"{what}_not_awaited", **{what: name}, awaited=sorted(names),
                             said="once while the workflow is in memory")

    def _record_outcome(self, message: ProcedureDone) -> None:
        try:
            with self._dispatcher.blocking():
                record_outcome(self.host.store, message)
        except Exception as e:  # the row stays pending: the call runs again at recovery
            self.log.warning("procedure_outcome_not_recorded", key=message.key, error=repr(e))

    # -- the loop -----------------------------------------------------------------------------
    def _pump(self) -> Steps:
        self.deferred = False
        while self.life is Life.RUNNING:
            decision = self._decide()
            if decision is None:
                return
            yield from self._carry(decision)

    def _decide(self, direct: Arrival | None = None) -> Decision | None:
        """Offer the instance everything that has arrived (and ``direct``, a signal not stored)."""
        inst = self.instance
        assert inst is not None
        inbox = self.inbox
        wait = inst.wait
        live = inst.started and wait is not None
        # Inbox rows arrived in the order of their seqs (a row durable before another was sent
        # has the smaller seq); their times come from their senders' clocks, which on a cluster
        # are several: a row is never placed before one with a smaller seq. The inbox says which
        # rows the wait takes and a cancel (which goes first) from its index: a workflow may hold
        # thousands of rows it does not await now, and they cost nothing here.
        arrived = float("-inf")
        cancel = None
        taken: list[tuple[InboxRow, float]] = []
        if inbox:
            if live:
                assert wait is not None
                taken, arrived, cancel = inbox.offer(wait.signal_names(), wait.request_names())
            else:
                cancel = inbox.first_cancel()
        if cancel is not None:
            reason = loads(cancel.payload)
            self.log.info("workflow_cancel_requested", reason=reason, **({"again": True} if inst.cancelled else {}))
            d = inst.decide(cancelled=True, cancel=reason)
            assert d is not None
            d.taken.append(Arrival(CANCEL, "cancel", cancel.created_at, cancel.seq, token=cancel))
            return d
        if not live:
            return inst.decide()
        if not (inbox or self.fired or self.done_procs or direct is not None):
            return None
        arrivals: list[Arrival] = []
        for r, at in taken:
            if r.kind == CHILD:
                ok, value = loads(r.payload)
                arrivals.append(Arrival(CHILD, r.name, at, r.seq, ok == "ok", value if ok == "ok" else None,
                                        None if ok == "ok" else value, 0, r))
            else:  # a signal's payload (an ask's Request) is unpickled only if a step takes it
                arrivals.append(Arrival(r.kind, r.name, at, r.seq, True, _Encoded(r.payload), None, 0, r))
        for row in self.fired.values():
            arrivals.append(Arrival("timer", row.id, row.due_at, row.id, token=row))
        for done in self.done_procs.values():
            arrivals.append(Arrival("procedure", done.key, float("-inf"), 0, done.ok, done.value, done.error,
                                    done.attempts, done))
        if direct is not None:
            # After every stored row: it was sent after they were durable, or at the same time.
            arrivals.append(direct if direct.at >= arrived else dataclasses.replace(direct, at=arrived))
        return inst.decide(arrivals, load=_signal_value)

    # -- steps ----------------------------------------------------------------------------------
    def _carry(self, decision: Decision) -> Steps:
        """Carry out ``decision``: run the step it resumes (or store its progress), commit, act."""
        inst = self.instance
        assert inst is not None
        self.step_started = time.perf_counter()
        sw = self._write_base(decision)
        if not decision.resume:
            assert decision.wait is not None
            packed, sw.waiting_on, sw.wait_signals = stored_forms(decision.wait)
            sw.continuation = pack_step(self.cont_blob, packed)
            sw.fingerprint = inst.continuation.fingerprint
            yield from self._commit(sw)
            inst.progressed(decision)
            return
        outcome = inst.run(decision, now=sw.updated_at, child_id_taken=self._child_exists)
        if outcome.losers:
            _writes.disarm(sw, outcome.losers, outcome.loser_reason)
        if outcome.effects:
            try:
                self._effects(sw, outcome)
            except Exception as e:
                outcome = StepOutcome(decision, outcome.step_seq, Raised(e), losers=outcome.losers,
                                      loser_reason=outcome.loser_reason)
        if outcome.suspended:
            self._new_wait(sw, outcome)
            ack = yield from self._commit(sw)
            self._suspended(sw, outcome, ack)
        else:
            yield from self._end(sw, outcome)

    def _write_base(self, decision: Decision) -> StepWrite:
        inst = self.instance
        assert inst is not None
        sw = StepWrite(
            workflow_id=self.id,
            step_seq=inst.step_seq + 1,
            updated_at=self.host.clock.now(),
            create=self.creating.seed[0] if self.creating is not None and self.creating.seed else None,
        )
        for a in [*decision.taken, *decision.dropped]:
            token = a.token
            if isinstance(token, InboxRow):
                sw.consume_inbox.append(token.seq)
            elif isinstance(token, TimerRow):
                sw.consume_timers.append(token.id)
            elif isinstance(token, ProcedureDone):
                sw.consume_procedures.append(token.key)
        self._note(sw, _cause(decision))
        return sw

    def _child_exists(self, child_id: str) -> bool:
        with self._reading():
            return self.host.store.load_workflow(child_id) is not None

    def _effects(self, sw: StepWrite, outcome: StepOutcome) -> None:
        """The step's effects, in call order: reducers, sends, broadcasts, subscriptions."""
        for eff in outcome.effects:
            if isinstance(eff, ReducerCall):
                sw.reducers.append(_bind_reducer(resolve("reducer", eff.function), eff.args, eff.kwargs))
            elif isinstance(eff, Send):
                sw.signals.append(OutSignal(eff.workflow_id, eff.name, dumps(eff.payload), SIGNAL))
            elif isinstance(eff, Broadcast):
                sw.broadcasts.append(OutBroadcast(eff.name, filter_key(eff.filter_value), dumps(eff.payload)))
            elif isinstance(eff, Subscribe):
                sw.subscribe.append((eff.name, filter_key(eff.filter_value)))
            elif isinstance(eff, Unsubscribe):
                sw.unsubscribe.append((eff.name, filter_key(eff.filter_value)))
        _replies.step_effects(sw, outcome.effects, self.id)  # publish(), reply()

    def _new_wait(self, sw: StepWrite, outcome: StepOutcome) -> None:
        """What a suspending step writes of its new wait: timers, procedure calls and children
        to create, and the continuation with the wait."""
        wait = outcome.wait
        assert wait is not None and outcome.checkpoint is not None
        for arm, cmd in zip(wait.arms, outcome.commands, strict=True):
            if arm.kind == "timer":
                assert arm.due_at is not None
                sw.new_timers.append(NewTimer(arm.target, arm.due_at))
            elif arm.kind == "procedure":
                assert arm.proc_key is not None and isinstance(cmd, Procedure)
                sw.new_procedures.append(NewProcedure(arm.proc_key, arm.target, pack_call(cmd.args, cmd.kwargs, cmd.timeout, cmd.retry), 0.0))
        for c in outcome.children:
            assert c.arm.child_id is not None
            sw.new_workflows.append(_writes.new_workflow_record(
                c.arm.child_id, c.workflow_type, c.checkpoint, c.fingerprint, created_at=sw.updated_at,
                parent_id=self.id, detached=c.arm.detached, test_mode=self.test_mode, spread=c.arm.spread,
            ))
        packed, sw.waiting_on, sw.wait_signals = stored_forms(wait, fresh=True)
        sw.continuation = pack_step(outcome.checkpoint, packed)
        sw.fingerprint = self.instance.continuation.fingerprint if self.instance is not None else None

    def _suspended(self, sw: StepWrite, outcome: StepOutcome, ack: StepAck) -> None:
        """A suspending step has committed: the instance takes its new wait, and what the step
        asked for is carried out."""
        inst = self.instance
        assert inst is not None and outcome.wait is not None and outcome.checkpoint is not None
        inst.committed(outcome)
        self.cont_blob = outcome.checkpoint
        rows = []
        if ack.timer_ids:
            timer_arms = [a for a in outcome.wait.arms if a.kind == "timer"]
            for arm, tid in zip(timer_arms, ack.timer_ids, strict=False):
                arm.timer_id = tid
                rows.append(TimerRow(tid, self.id, arm.target, arm.due_at or 0.0))
        seeds = {w.id: (w, c.continuation, c.checkpoint)
                 for c, w in zip(outcome.children, sw.new_workflows, strict=True)} if outcome.children else None
        self.host.carry_out(self.id, sw, ack, rows, self.test_mode, seeds, self.type or None)

    def _end(self, sw: StepWrite, outcome: StepOutcome) -> Steps:
        result = outcome.result
        if outcome.keep_continuation:
            assert isinstance(result, Raised)
            self.log.error("workflow_checkpoint_failed", error=str(result.exception))
            wait = self.wait
            sw.continuation = pack_step(self.cont_blob, pack_wait(wait))
        inst = self.instance
        assert inst is not None
        if isinstance(result, Finished):
            sent = _writes.end(sw, workflow_id=self.id, parent_id=inst.parent_id, value=result.value)
        else:
            assert isinstance(result, Raised)
            sent = _writes.end(sw, workflow_id=self.id, parent_id=inst.parent_id, error=result.exception)
        ack = yield from self._commit(sw)
        inst.committed(outcome)
        self._ended(sw, ack, sent)

    def _ended(self, sw: StepWrite, ack: StepAck, sent: tuple[str, Any]) -> None:
        self.life = Life.FINISHED
        # A workflow that failed for good is an error; a completed or cancelled one, lifecycle.
        (self.host.workflow_log.error if sw.status == FAILED else self.host.workflow_log.info)(
            "workflow_" + sw.status, workflow_id=self.id, workflow_type=self.type,
            **({"error": sent[1]["message"]} if sent[0] == "err" else {}),
        )
        self.host.carry_out(self.id, sw, ack, [], self.test_mode, workflow_type=self.type or None)
        self.host.finished(self.id, Outcome(sw.status, sw.result, sw.error))

    def _cancel_blocked(self, cancel: InboxRow) -> Steps:
        """End a workflow that cannot run (its code changed or is missing) as cancelled.

        Its code cannot run, so no ``finally`` or ``except Cancelled`` of it does: the step is the
        runtime's alone. What it waited for is disarmed and its children are cancelled, as for
        any ending; its last checkpoint stays in its row.
        """
        reason = loads(cancel.payload)
        self.log.info("workflow_cancel_requested", reason=reason, blocked=True)
        inst = self.instance
        assert inst is not None
        sw = StepWrite(workflow_id=self.id, step_seq=inst.step_seq + 1, updated_at=self.host.clock.now(),
                       consume_inbox=[cancel.seq])
        self._note(sw, ("cancel", ',"reason":' + _writes.text(reason)))
        _writes.disarm(sw, self.wait.pending() if self.wait else [], str(reason) if reason else "parent cancelled")
        sent = _writes.end(sw, workflow_id=self.id, parent_id=inst.parent_id, error=Cancelled(reason))
        ack = yield from self._commit(sw)
        inst.step_seq = sw.step_seq
        self._ended(sw, ack, sent)

    def _escalate(self, message: Escalate) -> Steps:
        """Fail a workflow whose actor keeps faulting; its parent gets ChildFailed.

        From the stored record alone: the continuation may be what cannot be loaded.
        """
        self._suspect()
        with self._reading():
            rec = self.host.store.load_workflow(self.id)
        if rec is None or rec.status != RUNNING:
            return
        self.type = rec.type
        self.test_mode = rec.test_mode
        try:
            wait = unpack_step(rec.continuation)[1] if rec.continuation else None
        except Exception:
            wait = None
        sw = StepWrite(workflow_id=self.id, step_seq=rec.step_seq + 1, updated_at=self.host.clock.now())
        _writes.disarm(sw, [a for a in wait.pending() if a.kind == "child"] if wait else [], "parent failed")
        error = message.error
        while isinstance(error, RuntimeFault) and error.__cause__ is not None:
            error = error.__cause__  # what went wrong underneath, not the runtime's wrapper
        sent = _writes.end(sw, workflow_id=self.id, parent_id=rec.parent_id, error=error, prefix=message.message)
        try:
            ack = yield from self._commit(sw)
        except Exception as e:
            raise EscalationFailed(f"could not record the failure of workflow {self.id!r}") from e
        self._ended(sw, ack, sent)

    def _note(self, sw: StepWrite, cause: tuple[str, str]) -> None:
        """Describe this step in the row's newest steps (``recent_steps``): what woke it.

        ``cause`` is the event's name and its detail's other fields, as JSON text after the
        step's number. The new text is the actor's once the step commits (``_commit``).
        """
        line = f'[{int(sw.updated_at * 1000)},"{cause[0]}",{{"step":{sw.step_seq}{cause[1]}}}]'
        text = self.recent
        if not text:
            sw.recent = line
        elif self.recent_count < _history.ROW_MOST:
            sw.recent = text + "\n" + line
        else:
            # The row is full: its oldest steps go to the history table, all in this step's one
            # statement (whole history), and it describes the newest RECENT_STEPS again.
            cut = -1
            for _ in range(_history.ROW_MOST - RECENT_STEPS + 1):
                cut = text.index("\n", cut + 1)
            sw.recent = text[cut + 1:] + "\n" + line
            limit = self.host.store.history_limit()
            if limit is None or limit > RECENT_STEPS:
                sw.evicted = text[:cut]
            else:  # kept nowhere: counted, so that the positions of the newer steps stay put
                sw.history_dropped = text.count("\n", 0, cut) + 1

    def _commit(self, sw: StepWrite) -> Steps:
        _history.describe(sw)  # what it armed, published, sent, replied
        sw.history_keep = _history.keep_rows(self.host.store.history_limit())
        if self.fire_requests:
            sw.consume_external = [
                self.fire_requests[t] for t in (*sw.consume_timers, *sw.cancel_timers)
                if t in self.fire_requests
            ]
        committed = self.host.store.submit_step(sw, here=True)
        # Whoever waits on this step (the sender of the signal it consumes, the caller of the
        # start it creates) is answered by the commit itself, on the writer's thread: the caller
        # goes on while this actor carries the step out.
        if self.answer is not None:
            committed.add_done_callback(functools.partial(_answer_on_commit, self.answer.reply, None))
        if sw.create is not None and self.creating is not None and self.creating.created is not None:
            committed.add_done_callback(functools.partial(_answer_on_commit, self.creating.created, True))
        try:
            ack = yield committed
        except Exception as e:
            if sw.create is not None and isinstance(e, WorkflowExists) and e.workflow_id == self.id:
                self._settle_start(False)
                raise _NotCreated(self.id) from e
            raise RuntimeFault(f"step {sw.step_seq} of workflow {self.id!r} did not commit: {e!r}") from e
        if sw.create is not None:
            self._settle_start(True)
        self.host.storage_ok(self.id)
        if self.host.metrics is not None:
            self.host.metrics.step(self.type, sw, self.step_started, ack.broadcast_to)
            self.step_started = 0.0
        self.host.workflow_log.debug("step_committed", workflow_id=self.id, workflow_type=self.type, step=sw.step_seq, status=sw.status)
        if sw.recent is not None:
            self.recent_count = sw.recent.count("\n") + 1
            self.recent = sw.recent
        if sw.consume_inbox:
            consumed = set(sw.consume_inbox)
            self.inbox.remove(consumed)
            self.consumed |= consumed
            if len(self.consumed) > CONSUMED_MEMORY:
                # No more Wakes can be queued than rows were appended since the last step.
                self.consumed = consumed
        for t in (*sw.consume_timers, *sw.cancel_timers):
            self.fired.pop(t, None)
        if sw.consume_external:
            self.fire_requests_done.extend(sw.consume_external)
            self.fire_requests = {t: s for t, s in self.fire_requests.items() if s not in sw.consume_external}
        for k in (*sw.consume_procedures, *sw.cancel_procedures):
            self.done_procs.pop(k, None)
        return ack


class _Encoded:
    """A signal's payload as stored: unpickled only if a step takes it."""

    __slots__ = ("blob",)

    def __init__(self, blob: bytes) -> None:
        self.blob = blob


def _answer(reply: Promise[Any], value: Any) -> None:
    """Answer a waiting caller, unless its step's commit has answered it already (on a dispatcher
    thread, the caller is let go as the slice ends: ``Promise.answer``)."""
    if not reply.done():
        reply.answer(value)


def _answer_on_commit(reply: Promise[Any], value: Any, committed: Promise[Any]) -> None:
    if committed.outcome()[1] is None:  # (a callback: its outcome is set)
        reply.answer(value)


def _takes(decision: Decision, message: DirectSignal) -> bool:
    """Whether the step ``decision`` resumes takes the signal ``message``."""
    for a in decision.taken:
        if a.token is message:
            return True
    return False


def _signal_value(value: Any) -> Any:
    return loads(value.blob) if isinstance(value, _Encoded) else value


@functools.lru_cache(maxsize=1024)
def _quoted(name: str) -> str:
    """A signal's, ask's or timer's name as JSON text: the same few names step after step."""
    return json.dumps(name)


def _cause(decision: Decision) -> tuple[str, str]:
    """What woke a step, for its line in the workflow's newest steps: the event and its fields."""
    if decision.first:
        return ("started", "")
    if decision.cancel is not None or isinstance(decision.throw, Cancelled):
        # (one that does not resume it: cancelled already, it goes on with its cleanup)
        again = "" if decision.resume else ',"again":true'
        return ("cancel", ',"reason":' + _writes.text(decision.cancel) + again)
    consumed = len(decision.taken) + len(decision.dropped)
    w, arm = decision.winner, decision.arm
    if w is None or arm is None:
        return ("gather", f',"taken":{consumed}')
    if w.kind == SIGNAL:
        cause = ("signal", ',"name":' + _quoted(w.key))
    elif w.kind == REQUEST:
        cause = ("request", ',"name":' + _quoted(w.key))
    elif w.kind == "timer":
        cause = ("timer", ',"name":' + _quoted(arm.target))
    elif w.kind == CHILD:
        ended = "completed" if w.ok else ("cancelled" if (w.error or {}).get("cancelled") else "failed")
        cause = ("child", f',"child":{json.dumps(w.key)},"outcome":"{ended}"')
    else:
        called = f',"function":{json.dumps(arm.target)},"attempts":{int(w.attempts)}'
        if w.ok:
            cause = ("procedure", called + ',"ok":true')
        else:
            cause = ("procedure", called + ',"ok":false,"error":' + _writes.text((w.error or {}).get("type")))
    if consumed > 1:  # a gather took others in this step, before the one that resumed it
        cause = (cause[0], cause[1] + f',"taken":{consumed}')
    return cause


def _upgraded_checkpoint(cont: Any, up: Upgrade) -> bytes:
    """The checkpoint of a continuation just moved onto new code (held if it cannot be made)."""
    try:
        blob: bytes = checkpoint(cont)
    except CheckpointError as e:
        raise VersionMismatch(
            f"continuation of workflow {up.workflow_type} could be moved onto the loaded code "
            f"{up.loaded[:12]} but not checkpointed there ({e}); it is kept as it was",
            workflow_type=up.workflow_type, stored=up.stored, loaded=up.loaded, reasons=(str(e),),
        ) from e
    return blob


def _blocked_reason(rec: WorkflowRecord) -> str | None:
    """Why the stored record shows the workflow as blocked, or None (parsed only if it may)."""
    if not rec.waiting_on or '"blocked"' not in rec.waiting_on:
        return None
    reason: str | None = json.loads(rec.waiting_on).get("blocked")
    return reason


def _maybe_committed(e: BaseException) -> bool:
    """True if ``e`` (or a cause of it) says its write's COMMIT may have gone through."""
    cur: BaseException | None = e
    for _ in range(8):
        if cur is None:
            return False
        if getattr(cur, "maybe_committed", False) is True:
            return True
        cur = cur.__cause__
    return False


def _cause_of(e: BaseException, kind: type[E]) -> E | None:
    """``e`` or the first of its causes that is a ``kind``, or None."""
    cur: BaseException | None = e
    for _ in range(8):
        if cur is None:
            return None
        if isinstance(cur, kind):
            return cur
        cur = cur.__cause__
    return None




def _missing_code(e: BaseException) -> str | None:
    """Why ``e`` is code this process lacks (not a fault that a restart may cure), or None."""
    seen = 0
    cur: BaseException | None = e
    while cur is not None and seen < 8:
        if isinstance(cur, UnknownWorkflowType):
            return str(cur)
        if isinstance(cur, MalformedPayload) and isinstance(cur.__cause__, (ImportError, AttributeError)):
            return (
                f"a message or result it takes refers to code that cannot be found "
                f"({type(cur.__cause__).__name__}: {cur.__cause__}). Make that module importable (on "
                f"sys.path) in the process that opens the database."
            )
        cur, seen = cur.__cause__, seen + 1
    return None


class ReducerExited(Exception):
    """A reducer ended by an exception that is no ``Exception`` (``SystemExit`` from library code
    calling ``sys.exit()``, a stray ``KeyboardInterrupt``): a fault of the reducer like any other
    error (its step rolled back, its actor restarted), carried as an ``Exception`` so the writer
    that runs it fails that step alone and goes on."""


def _bind_reducer(fn: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    def run(db: Any) -> None:
        try:
            fn(db, *args, **kwargs)
        except Exception:
            raise
        except BaseException as e:
            raise ReducerExited(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from e

    # Errors name the reducer by its own module:qualname, not this wrapper's.
    functools.update_wrapper(run, fn)
    return run
