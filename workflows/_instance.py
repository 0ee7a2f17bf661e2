"""A workflow instance: its continuation, what it waits for, and the rules of resuming it.

This is the pure core that both the actor runtime and ``workflows.testing.WorkflowHarness`` drive.
It does no I/O, starts no threads and reads no clock: the caller passes the time of each step and
every event that has arrived, and gets back decisions and step outcomes as data.

- ``Wait`` and ``Arm``: what a suspended workflow waits for (timers, signals, procedures,
  children), built from the command it suspended on (``build_wait``).
- ``WorkflowInstance.decide(arrivals, cancel=...)``: given what has arrived, what happens next.
  A cancel wins over every other event; a workflow that never ran takes its first step; otherwise
  the earliest arrivals resolve the wait's arms in time order: the first one resumes a ``select``
  (the other arms lose), a ``gather`` resumes once every arm has its result (or at its first
  failure, the others losing), a single command on its one arm. A child's outcome that no arm
  awaits is taken and dropped; other arrivals no arm awaits stay where they are.
- ``WorkflowInstance.run(decision, now=...)``: run workflow code up to its next suspension and
  return the ``StepOutcome``: the new wait (or the ending), the effects recorded, the children to
  create, the arms to disarm. Nothing in the instance changes until ``committed(outcome)``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._commands import (
    Command,
    Event,
    Gather,
    Procedure,
    RequestCommand,
    Select,
    Signal,
    Spawn,
    Timer,
)
from ._compiler import checkpoint, step
from ._context import Effect, Reply, StepContext
from ._errors import (
    MAX_TEXT_BYTES,
    Cancelled,
    CheckpointError,
    ChildFailed,
    ProcedureFailed,
    WorkflowError,
)
from ._registry import check_findable, resolve
from ._step import Raised, StepResult, Suspended
from ._talk import Request

__all__ = [
    "Arm",
    "Arrival",
    "ChildStart",
    "Decision",
    "StepOutcome",
    "Wait",
    "WorkflowInstance",
    "build_wait",
]

TIMER, SIGNAL, PROCEDURE, CHILD, REQUEST = "timer", "signal", "procedure", "child", "request"

# Why the arms a step disarms lose, by what ended them.
LOST_SELECT = "the select that spawned it was won by another arm"
PARENT_ENDED = "parent ended"


@dataclass
class Arm:
    """One thing a wait waits for."""

    index: int
    kind: str  # "timer" | "signal" | "request" | "procedure" | "child"
    name: str  # the Event name of this arm
    target: str  # timer name | signal name | request name | procedure function key | child workflow type
    due_at: float | None = None  # timers
    timer_id: int | None = None  # timers, known once the step that armed it committed
    proc_key: str | None = None  # procedures: idempotency key
    child_id: str | None = None  # children
    detached: bool = False
    done: bool = False
    spread: bool = False  # children: placed by their own id's shard on a cluster, not the parent's

    # A wait of thousands of arms is stored whole at every step that takes one of them: what an
    # arm stores, and its description, are made once and kept on it. An arm changes only when its
    # timer's id becomes known; one taken is replaced by a copy with ``done`` set.
    def fields(self) -> tuple[Any, ...]:
        """The arm as plain values, in field order (what a step stores of it)."""
        got: tuple[Any, ...] | None = self.__dict__.get("_fields")
        if got is None or got[5] != self.timer_id or got[9] is not self.done:
            got = self.__dict__["_fields"] = (
                self.index, self.kind, self.name, self.target, self.due_at, self.timer_id,
                self.proc_key, self.child_id, self.detached, self.done, self.spread,
            )
        return got

    def description(self) -> str:
        """What the arm awaits, as JSON (an element of ``Wait.describe``)."""
        got: str | None = self.__dict__.get("_description")
        if got is None:
            d: dict[str, Any] = {"kind": self.kind, "name": self.name}
            if self.kind == TIMER:
                d["due_at"] = self.due_at
            elif self.kind == PROCEDURE:
                d["function"], d["key"] = self.target, self.proc_key
            elif self.kind == CHILD:
                d["workflow_id"], d["type"] = self.child_id, self.target
            got = self.__dict__["_description"] = json.dumps(d)
        return got


@dataclass
class Wait:
    """The arms a workflow waits on now, and (for gather) the results so far."""

    mode: str  # "one" | "select" | "gather"
    arms: list[Arm]
    results: dict[int, Any] = field(default_factory=dict)
    location: str | None = None
    # The workflow was cancelled already (it runs its cleanup): a later cancel request is a
    # no-op, not a second Cancelled thrown into that cleanup.
    cancelled: bool = False

    def pending(self) -> list[Arm]:
        return [a for a in self.arms if not a.done]

    def signal_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.target for a in self.pending() if a.kind == SIGNAL))

    def request_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.target for a in self.pending() if a.kind == REQUEST))

    def arm_for_signal(self, name: str) -> Arm | None:
        for a in self.arms:
            if not a.done and a.kind == SIGNAL and a.target == name:
                return a
        return None

    def arm_for_timer_name(self, name: str) -> Arm | None:
        for a in self.arms:
            if not a.done and a.kind == TIMER and a.name == name:
                return a
        return None

    def arm_for_procedure(self, key: str) -> Arm | None:
        # A key made by this wait ends with its arm's index (``build_wait``): looked up there
        # first, so a gather of thousands of calls is not a scan per outcome.
        i = key.rpartition(".")[2]
        if i.isdigit() and int(i) < len(self.arms):
            a = self.arms[int(i)]
            if not a.done and a.kind == PROCEDURE and a.proc_key == key:
                return a
        for a in self.arms:
            if not a.done and a.kind == PROCEDURE and a.proc_key == key:
                return a
        return None

    def description(self) -> dict[str, Any]:
        """What is awaited, as plain data (``describe`` is its JSON)."""
        return json.loads(self.describe())  # type: ignore[no-any-return]

    def describe(self) -> str:
        """Readable JSON of what is awaited (for ``wf show`` and ``WorkflowInfo.waiting_on``):
        ``{"mode": ..., "at": ..., "arms": [...]}``, each pending arm's description in order."""
        arms = ", ".join([a.description() for a in self.arms if not a.done])
        return f'{{"mode": {json.dumps(self.mode)}, "at": {json.dumps(self.location)}, "arms": [{arms}]}}'


def build_wait(command: Command, *, workflow_id: str, step_seq: int, now: float) -> Wait:
    """The wait for ``command``, with deterministic procedure keys and child ids.

    Keys derive from the workflow id and the step number, which commits exactly once, so a
    procedure keeps its idempotency key and a child its id across crashes and retries.
    """
    if isinstance(command, Select):
        mode, cmds = "select", list(command.commands)
    elif isinstance(command, Gather):
        mode, cmds = "gather", list(command.commands)
    else:
        mode, cmds = "one", [command]
    arms = []
    for i, c in enumerate(cmds):
        if isinstance(c, Timer):
            arm = Arm(i, TIMER, c.arm_name, c.name, due_at=c.due(now))
        elif isinstance(c, Signal):
            arm = Arm(i, SIGNAL, c.arm_name, c.name)
        elif isinstance(c, RequestCommand):
            arm = Arm(i, REQUEST, c.arm_name, c.name)
        elif isinstance(c, Procedure):
            arm = Arm(i, PROCEDURE, c.arm_name, c.function, proc_key=f"{workflow_id}#{step_seq}.{i}")
        elif isinstance(c, Spawn):
            child_id = c.id or generated_child_id(workflow_id, c.arm_name, step_seq, i)
            arm = Arm(i, CHILD, c.arm_name, c.workflow, child_id=child_id, detached=c.detached,
                      spread=c.placement == "spread")
        else:  # pragma: no cover - the compiler only suspends on commands
            raise TypeError(f"cannot wait on {c!r}")
        arms.append(arm)
    return Wait(mode, arms)


def generated_child_id(workflow_id: str, arm_name: str, step_seq: int, i: int) -> str:
    """The id of a child spawned with no ``id=``: ``parent/name-step.arm``, cut to the longest
    id there may be, where a deep tree or a long parent id makes it longer. Cut, its parent's part
    keeps its start and takes a digest of the whole id (still one id per child, the same at every
    run of the step), and the child's own part stays whole when it is short."""
    own = f"/{arm_name}-{step_seq}.{i}"
    full = workflow_id + own
    data = full.encode("utf-8")
    if len(data) <= MAX_TEXT_BYTES:
        return full
    mark = "~" + hashlib.sha256(data).hexdigest()[:24]
    if len(own.encode("utf-8")) > MAX_TEXT_BYTES // 4:
        head, own = full, ""
    else:
        head = workflow_id
    room = MAX_TEXT_BYTES - len(mark) - len(own.encode("utf-8"))
    return head.encode("utf-8")[:room].decode("utf-8", "ignore") + mark + own


@dataclass(frozen=True)
class Arrival:
    """Something that has arrived for the workflow and may resolve one of its arms.

    ``key`` is what it answers: a signal's name, a child's id, a timer's id, a procedure's key.
    ``at`` and ``order`` place it in time (arrivals resolve earliest first); a procedure's outcome
    comes before every other arrival. ``ok``/``value`` is the outcome; a failed child or procedure
    carries ``error``, its error information (``type``, ``message``, ``traceback``, and
    ``cancelled`` for a cancelled child). ``attempts`` counts a procedure's attempts. ``token`` is
    the caller's own handle on it (what the step consumes); the instance never looks inside it.
    """

    kind: str
    key: Any
    at: float = 0.0
    order: int = 0
    ok: bool = True
    value: Any = None
    error: dict[str, Any] | None = None
    attempts: int = 0
    token: Any = None

    @staticmethod
    def signal(name: str, value: Any = None, *, at: float = 0.0, order: int = 0, token: Any = None) -> Arrival:
        return Arrival(SIGNAL, name, at, order, True, value, None, 0, token)

    @staticmethod
    def timer(timer_id: int, due_at: float = 0.0, *, token: Any = None) -> Arrival:
        return Arrival(TIMER, timer_id, due_at, timer_id, token=token)

    @staticmethod
    def procedure(key: str, ok: bool, value: Any = None, error: dict[str, Any] | None = None,
                  attempts: int = 1, *, token: Any = None) -> Arrival:
        return Arrival(PROCEDURE, key, float("-inf"), 0, ok, value, error, attempts, token)

    @staticmethod
    def child(child_id: str, ok: bool, value: Any = None, error: dict[str, Any] | None = None, *,
              at: float = 0.0, order: int = 0, token: Any = None) -> Arrival:
        return Arrival(CHILD, child_id, at, order, ok, value, error, 0, token)


@dataclass
class Decision:
    """What the arrivals mean for the workflow now.

    ``resume``: run workflow code (``send`` as the awaited result, or ``throw`` raised at the
    await; ``first`` for the first step of a new workflow). Otherwise only ``taken`` is consumed and
    ``wait`` stored: a gather recorded results without finishing, or child outcomes no arm awaits
    were dropped. ``winner`` is the arrival that resumed it (None for a cancel or a first step),
    ``arm`` the arm it resolved, ``cancel`` the reason of a cancel being carried out (a cancel of a
    workflow that never ran ends it without running: ``run`` sees ``started`` False).
    ``taken``: every arrival consumed by this step, in the order taken. ``losers``: the arms to
    disarm, because the select or gather resolved or the workflow was cancelled.
    """

    resume: bool
    send: Any = None
    throw: BaseException | None = None
    first: bool = False
    cancel: Any = None
    winner: Arrival | None = None
    arm: Arm | None = None
    taken: list[Arrival] = field(default_factory=list)
    dropped: list[Arrival] = field(default_factory=list)
    losers: list[Arm] = field(default_factory=list)
    wait: Wait | None = None  # the wait after a decision that does not resume
    # Requests a gather took, then failed before the workflow saw them: the step refuses them.
    abandoned: list[Request] = field(default_factory=list)


@dataclass(frozen=True)
class ChildStart:
    """A child workflow a step spawns: created by the step's commit, with its first state."""

    arm: Arm
    workflow_type: str
    continuation: Any
    checkpoint: bytes
    fingerprint: str


@dataclass
class StepOutcome:
    """What one step produced.

    ``result`` is ``Suspended`` (then ``wait``, ``checkpoint`` and ``commands`` describe the new
    wait), ``Finished`` or ``Raised``. ``effects`` are the reducer calls, sends, broadcasts and
    subscription changes in call order. ``losers`` are the arms to disarm, for ``loser_reason``.
    ``keep_continuation``: the step ended the workflow because its continuation could not be
    checkpointed; the last checkpoint stays.
    """

    decision: Decision
    step_seq: int
    result: StepResult
    effects: list[Effect] = field(default_factory=list)
    wait: Wait | None = None
    checkpoint: bytes | None = None
    commands: tuple[Command, ...] = ()
    children: list[ChildStart] = field(default_factory=list)
    losers: list[Arm] = field(default_factory=list)
    loser_reason: str = PARENT_ENDED
    keep_continuation: bool = False

    @property
    def suspended(self) -> bool:
        return isinstance(self.result, Suspended)


# How a continuation is advanced: ``step(continuation, send, throw)``.
Stepper = Callable[[Any, Any, BaseException | None], StepResult]


class WorkflowInstance:
    """One workflow: its continuation, its wait, its step count, and the rules that move it.

    Args:
        continuation: the compiled continuation (or what ``stepper`` advances).
        wait: what it waits for now (None before its first step).
        step_seq: how many steps have committed (0: it never ran).
        workflow_id, workflow_type, parent_id, test_mode, scheduled_at: what the workflow sees
            of itself (``info()``).
        stepper: how a step runs (the compiled ``step`` by default).
        checkpointing: checkpoint the continuation at each suspension (what the runtime stores).
        spawning: build each spawned child's first state (what the runtime creates with the step).
    """

    def __init__(
        self,
        continuation: Any,
        wait: Wait | None = None,
        *,
        step_seq: int = 0,
        workflow_id: str,
        workflow_type: str,
        parent_id: str | None = None,
        test_mode: bool = False,
        scheduled_at: float | None = None,
        stepper: Stepper | None = None,
        checkpointing: bool = True,
        spawning: bool = True,
    ) -> None:
        self.continuation = continuation
        self.wait = wait
        self.step_seq = step_seq
        self.workflow_id = workflow_id
        self.workflow_type = workflow_type
        self.parent_id = parent_id
        self.test_mode = test_mode
        self.scheduled_at = scheduled_at
        self._stepper = stepper or WorkflowInstance.compiled_step
        self._checkpointing = checkpointing
        self._spawning = spawning

    @staticmethod
    def compiled_step(cont: Any, send: Any, throw: BaseException | None) -> StepResult:
        """Advance a compiled continuation (the default stepper)."""
        return step(cont, throw=throw) if throw is not None else step(cont, send=send)

    @property
    def started(self) -> bool:
        return self.step_seq > 0

    @property
    def cancelled(self) -> bool:
        """A cancel was carried out already: the workflow runs (or waits in) its cleanup."""
        return self.wait is not None and self.wait.cancelled

    # -- deciding ------------------------------------------------------------------------------
    def decide(self, arrivals: Iterable[Arrival] = (), *, cancel: Any = None, cancelled: bool = False,
               load: Callable[[Any], Any] | None = None) -> Decision | None:
        """What happens next, given what has arrived; None: nothing (wait on).

        ``cancelled`` with its reason in ``cancel``: a cancel was requested, and it comes before
        everything else. Arrivals are resolved earliest first (by ``at``, then ``order``, then as
        given); the decision does not change the instance. ``load`` turns the ``value`` of an
        arrival that is taken into the value the workflow receives (a caller that keeps payloads
        encoded decodes only those).
        """
        if cancelled:
            if self.cancelled:
                # Cancelled already, and running its cleanup: the request is taken, and changes
                # nothing (a second Cancelled would cut that cleanup short).
                return Decision(False, cancel=cancel, wait=self.wait)
            pending = self.wait.pending() if self.wait is not None else []
            return Decision(True, throw=Cancelled(cancel), cancel=cancel, losers=pending)
        if not self.started:
            return Decision(True, first=True)
        if self.wait is None:
            return None
        return self._resolve(self.wait, sorted(arrivals, key=_when), load)

    def _resolve(self, wait: Wait, arrivals: Sequence[Arrival], load: Callable[[Any], Any] | None) -> Decision | None:
        # The pending arms by what resolves them (a gather of n children must not cost n * n).
        by_signal: dict[str, list[Arm]] = {}
        by_request: dict[str, list[Arm]] = {}
        by_key: dict[tuple[str, Any], Arm] = {}
        for a in wait.arms:
            if a.done:
                continue
            if a.kind == SIGNAL:
                by_signal.setdefault(a.target, []).append(a)
            elif a.kind == REQUEST:
                by_request.setdefault(a.target, []).append(a)
            elif a.kind == CHILD:
                by_key[(CHILD, a.child_id)] = a
            elif a.kind == TIMER and a.timer_id is not None:
                by_key[(TIMER, a.timer_id)] = a
            elif a.kind == PROCEDURE:
                by_key[(PROCEDURE, a.proc_key)] = a
        done: set[int] = set()
        results: dict[int, Any] = {}
        taken: list[Arrival] = []
        dropped: list[Arrival] = []
        for arrival in arrivals:
            if arrival.kind == SIGNAL or arrival.kind == REQUEST:
                arms = (by_signal if arrival.kind == SIGNAL else by_request).get(arrival.key)
                arm = arms.pop(0) if arms else None
            else:
                arm = by_key.pop((arrival.kind, arrival.key), None)
            if arm is None:
                if arrival.kind == CHILD:
                    dropped.append(arrival)  # a child no arm awaits (a select's loser): its outcome goes
                continue
            taken.append(arrival)
            done.add(arm.index)
            error = None if arrival.ok else _failure(arrival, arm)
            value = arrival.value if load is None or error is not None else load(arrival.value)
            if wait.mode == "one" or (wait.mode == "select" and error is None):
                send = value if wait.mode == "one" else Event(arm.name, value, arm.kind)
                return self._resumed(wait, done, arrival, arm, taken, dropped, send=send, throw=error)
            if error is not None:  # a select's or a gather's arm failed: the others lose
                decision = self._resumed(wait, done, arrival, arm, taken, dropped, throw=error)
                # What the gather's arms took is dropped with it: an ask it took would never be
                # answered (its asker waiting until the workflow ends), so the step refuses it.
                got = {**wait.results, **results}
                decision.abandoned = [
                    got[a.index] for a in wait.arms
                    if a.kind == REQUEST and isinstance(got.get(a.index), Request)
                ]
                return decision
            results[arm.index] = value
            if len(wait.results) + len(results) == len(wait.arms):
                every = {**wait.results, **results}
                return self._resumed(wait, done, arrival, arm, taken, dropped, send=[every[a.index] for a in wait.arms])
        if not taken and not dropped:
            return None
        # The wait after: the arms taken done, the others shared (nothing changes them).
        after = Wait(wait.mode, [dataclasses.replace(a, done=True) if a.index in done else a for a in wait.arms],
                     {**wait.results, **results}, wait.location, wait.cancelled)
        return Decision(False, taken=taken, dropped=dropped, wait=after)

    def _resumed(self, wait: Wait, done: set[int], winner: Arrival, arm: Arm, taken: list[Arrival],
                 dropped: list[Arrival], *, send: Any = None, throw: BaseException | None = None) -> Decision:
        losers = [a for a in wait.arms if not a.done and a.index not in done] if wait.mode != "one" else []
        return Decision(True, send=send, throw=throw, winner=winner, arm=arm, taken=taken, dropped=dropped, losers=losers)

    # -- running ---------------------------------------------------------------------------------
    def run(self, decision: Decision, *, now: float, child_id_taken: Callable[[str], bool] = lambda _id: False) -> StepOutcome:
        """Run the step ``decision`` resumes, at time ``now``, and return what it produced.

        ``child_id_taken(id)`` says whether a workflow of that id exists (a spawn with an explicit
        id that is taken fails at its await). The continuation advances; the rest of the instance
        changes only with ``committed``.
        """
        seq = self.step_seq + 1
        reason = PARENT_ENDED
        if decision.cancel is not None or isinstance(decision.throw, Cancelled):
            reason = str(decision.throw) or "parent cancelled"
        elif decision.losers:
            reason = LOST_SELECT
        if not decision.resume:
            raise ValueError("run() takes a decision that resumes the workflow; store a gather's "
                             "progress with progressed()")
        if decision.throw is not None and isinstance(decision.throw, Cancelled) and not self.started:
            # Cancelled before its first step: no code of it ever runs.
            return StepOutcome(decision, seq, Raised(decision.throw), losers=list(decision.losers), loser_reason=reason)
        ctx = StepContext(self.workflow_id, self.workflow_type, self.parent_id, now, self.test_mode,
                          scheduled_at=self.scheduled_at)
        for req in decision.abandoned:
            where = f"the gather at {self.wait.location}" if self.wait and self.wait.location else "a gather"
            ctx.effects.append(Reply(req.id, req.name, None, WorkflowError(
                f"request {req.name!r} (ask {req.id!r}) was taken by {where} in workflow "
                f"{self.workflow_id!r}, which failed ({type(decision.throw).__name__}: "
                f"{decision.throw}) before the workflow saw the request: nothing will answer it; "
                f"ask again"
            )))
        cont = self.continuation
        with ctx.active():
            result = self._stepper(cont, None if decision.first else decision.send, decision.throw)
            # Building the new wait can fail (a child's arguments do not bind, a procedure that
            # cannot be found): raised at the await, where the workflow can catch it.
            while isinstance(result, Suspended):
                commands = _arm_commands(result.command)
                try:
                    wait, children = self._new_wait(result.command, commands, seq, now, child_id_taken)
                    wait.cancelled = self.cancelled or decision.cancel is not None or isinstance(
                        decision.throw, Cancelled)
                    break
                except Exception as e:
                    result = self._stepper(cont, None, e)
        out = StepOutcome(decision, seq, result, effects=list(ctx.effects), losers=list(decision.losers), loser_reason=reason)
        if not isinstance(result, Suspended):
            return out
        if self._checkpointing:
            try:
                out.checkpoint = checkpoint(cont)
            except CheckpointError as e:
                # Ends the workflow FAILED; its last good checkpoint stays, and its new wait's arms
                # were never armed.
                return StepOutcome(decision, seq, Raised(e), losers=list(decision.losers), loser_reason=reason,
                                   keep_continuation=True)
        location = getattr(cont, "location", None)
        wait.location = location() if callable(location) else None
        out.wait = wait
        out.commands = commands
        out.children = children
        return out

    def _new_wait(self, command: Command, commands: tuple[Command, ...], seq: int, now: float,
                  child_id_taken: Callable[[str], bool]) -> tuple[Wait, list[ChildStart]]:
        wait = build_wait(command, workflow_id=self.workflow_id, step_seq=seq, now=now)
        children: list[ChildStart] = []
        ids: set[str] = set()
        for arm, cmd in zip(wait.arms, commands, strict=True):
            if arm.kind == PROCEDURE:
                check_findable("procedure", arm.target)
            elif arm.kind == CHILD:
                assert arm.child_id is not None and isinstance(cmd, Spawn)
                if cmd.id is not None and (arm.child_id in ids or child_id_taken(arm.child_id)):
                    raise WorkflowError(
                        f"spawn({arm.target}, id={arm.child_id!r}) in workflow {self.workflow_id!r}: a "
                        f"workflow with that id exists already, so no child was started. Choose an id "
                        f"no workflow has, or leave id=None for a generated one."
                    )
                ids.add(arm.child_id)
                if self._spawning:
                    child = resolve("workflow", arm.target).start(*cmd.args)
                    children.append(ChildStart(arm, arm.target, child, checkpoint(child), child.fingerprint))
        return wait, children

    def progressed(self, decision: Decision) -> None:
        """The step that stored ``decision`` (one that does not resume) is durable."""
        if decision.resume or decision.wait is None:
            raise ValueError("progressed() takes a decision that does not resume the workflow")
        self.step_seq += 1
        self.wait = decision.wait

    def committed(self, outcome: StepOutcome) -> None:
        """The step ``outcome`` came from is durable: the instance moves on to it."""
        self.step_seq = outcome.step_seq
        if outcome.suspended:
            self.wait = outcome.wait
        elif not outcome.keep_continuation:
            self.wait = None


def _when(a: Arrival) -> tuple[float, int]:
    return (a.at, a.order)


def _arm_commands(command: Command) -> tuple[Command, ...]:
    if isinstance(command, Select | Gather):
        return command.commands
    return (command,)


def _failure(arrival: Arrival, arm: Arm) -> WorkflowError:
    """The exception a failed child or procedure raises at the workflow's await."""
    info = arrival.error or {}
    if arrival.kind == CHILD:
        return ChildFailed(
            f"child workflow {arrival.key!r} ({arm.target}) "
            + ("was cancelled" if info.get("cancelled") else f"failed: {info.get('type')}: {info.get('message')}"),
            child_id=arrival.key,
            child_type=arm.target,
            error_type=info.get("type", ""),
            error_message=info.get("message", ""),
            traceback=info.get("traceback", ""),
        )
    return ProcedureFailed(
        f"procedure {arm.target} failed after {arrival.attempts} attempt(s): "
        f"{info.get('type')}: {info.get('message')}",
        procedure=arm.target,
        attempts=arrival.attempts,
        error_type=info.get("type", ""),
        error_message=info.get("message", ""),
        traceback=info.get("traceback", ""),
    )

