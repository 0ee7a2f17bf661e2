"""What a suspended workflow waits for, and how arriving events resolve it.

A ``Wait`` is built from the command a step suspended on. Its arms are the timers, signals,
procedures and children it waits for; ``select`` resolves on the first arm, ``gather`` on all of them
(or the first failure), a single command on its one arm. The wait is stored next to the
continuation, so it survives a restart.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from json.encoder import encode_basestring_ascii
from typing import Any

from persistence import dumps, loads, register_plain
from workflows import Event
from workflows._commands import Command, Gather, Procedure, Select, Signal, Spawn, Timer


@register_plain
@dataclass
class Arm:
    """One thing a wait waits for."""

    index: int
    kind: str  # "timer" | "signal" | "procedure" | "child"
    name: str  # the Event name of this arm
    target: str  # timer name | signal name | procedure function key | child workflow type
    due_at: float | None = None  # timers
    timer_id: int | None = None  # timers, known once the step committed
    proc_key: str | None = None  # procedures: idempotency key
    child_id: str | None = None  # children
    detached: bool = False
    done: bool = False


@register_plain
@dataclass
class Wait:
    """The arms a workflow waits on now, and (for gather) the results so far."""

    mode: str  # "one" | "select" | "gather"
    arms: list[Arm]
    results: dict[int, Any] = field(default_factory=dict)
    location: str | None = None

    def pending(self) -> list[Arm]:
        return [a for a in self.arms if not a.done]

    def signal_names(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(a.target for a in self.pending() if a.kind == "signal"))

    def arm_for_signal(self, name: str) -> Arm | None:
        for a in self.arms:
            if not a.done and a.kind == "signal" and a.target == name:
                return a
        return None

    def arm_for_timer(self, timer_id: int) -> Arm | None:
        for a in self.arms:
            if not a.done and a.kind == "timer" and a.timer_id == timer_id:
                return a
        return None

    def arm_for_timer_name(self, name: str) -> Arm | None:
        for a in self.arms:
            if not a.done and a.kind == "timer" and a.name == name:
                return a
        return None

    def arm_for_procedure(self, key: str) -> Arm | None:
        for a in self.arms:
            if not a.done and a.kind == "procedure" and a.proc_key == key:
                return a
        return None

    def arm_for_child(self, child_id: str) -> Arm | None:
        for a in self.arms:
            if not a.done and a.kind == "child" and a.child_id == child_id:
                return a
        return None

    def describe(self) -> str:
        """Readable JSON of what is awaited (for ``wf show`` and ``WorkflowInfo.waiting_on``).

        Exactly ``json.dumps({"mode": ..., "at": ..., "arms": [...]})``, made from fragments: the
        part of an arm that is the same at every step (its kind, name and target) is encoded once.
        """
        arms = ", ".join([_arm_json(a) for a in self.arms if not a.done])
        return f'{{"mode": {_jv(self.mode)}, "at": {_jv(self.location)}, "arms": [{arms}]}}'


def _jv(value: Any) -> str:
    """``json.dumps(value)`` for one value."""
    if type(value) is str:
        return encode_basestring_ascii(value)  # what json.dumps does with a str
    if type(value) is float and value - value == 0.0:  # finite: json writes float.__repr__
        return float.__repr__(value)
    return json.dumps(value)


# An arm's JSON around its one varying value, and the attribute holding that value (None for a
# signal, which has none), by (kind, name, target).
_ARM_PARTS: dict[tuple[str, str, str], tuple[str, str, str | None]] = {}


def _arm_json(a: Arm) -> str:
    key = (a.kind, a.name, a.target)
    parts = _ARM_PARTS.get(key)
    if parts is None:
        head = f'{{"kind": {_jv(a.kind)}, "name": {_jv(a.name)}'
        if a.kind == "timer":
            parts = (head + ', "due_at": ', "}", "due_at")
        elif a.kind == "procedure":
            parts = (f'{head}, "function": {_jv(a.target)}, "key": ', "}", "proc_key")
        elif a.kind == "child":
            parts = (head + ', "workflow_id": ', f', "type": {_jv(a.target)}}}', "child_id")
        else:
            parts = (head + "}", "", None)
        if len(_ARM_PARTS) >= _STORED_MAX:
            _ARM_PARTS.clear()
        _ARM_PARTS[key] = parts
    before, after, varying = parts
    if varying is None:
        return before
    return before + _jv(getattr(a, varying)) + after


# What a step stores of a new wait that awaits signals only, by (mode, location, arms): a loop
# awaiting its next signal stores the same three things at every step. Cleared when full.
_STORED: dict[tuple[Any, ...], tuple[bytes, str, tuple[str, ...]]] = {}
_STORED_MAX = 4096


def stored_forms(wait: Wait, *, fresh: bool = False) -> tuple[bytes, str, tuple[str, ...]]:
    """What a step stores of ``wait``: its payload, its description and the signals it awaits.

    ``fresh``: ``wait`` is as ``build_wait`` made it (and its location set). Such a wait on
    signals only is the same every time it is built at one await: its forms are built once.
    """
    if fresh and not wait.results and all(a.kind == "signal" for a in wait.arms):
        key = (wait.mode, wait.location, *[(a.name, a.target) for a in wait.arms])
        forms = _STORED.get(key)
        if forms is None:
            if len(_STORED) >= _STORED_MAX:
                _STORED.clear()
            forms = _STORED[key] = (dumps(wait), wait.describe(), wait.signal_names())
        return forms
    return dumps(wait), wait.describe(), wait.signal_names()


def envelope(blob: bytes, packed_wait: bytes | None) -> dict[str, Any]:
    """The step envelope stored as a workflow's continuation: its checkpoint and its wait."""
    return {"cont": blob, "wait_p": packed_wait}


def envelope_wait(env: dict[str, Any]) -> Wait | None:
    """The wait of a stored envelope (files written before ``wait_p`` hold the Wait itself)."""
    packed = env.get("wait_p")
    return loads(packed) if packed is not None else env.get("wait")


@dataclass(frozen=True)
class ArmRequest:
    """A side effect a new wait needs committed with its step."""

    arm: Arm
    command: Command


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
            arm = Arm(i, "timer", c.arm_name, c.name, due_at=c.due(now))
        elif isinstance(c, Signal):
            arm = Arm(i, "signal", c.arm_name, c.name)
        elif isinstance(c, Procedure):
            arm = Arm(i, "procedure", c.arm_name, c.function, proc_key=f"{workflow_id}#{step_seq}.{i}")
        elif isinstance(c, Spawn):
            child_id = c.id or f"{workflow_id}/{c.arm_name}-{step_seq}.{i}"
            arm = Arm(i, "child", c.arm_name, c.workflow, child_id=child_id, detached=c.detached)
        else:  # pragma: no cover - the compiler only suspends on commands
            raise TypeError(f"cannot wait on {c!r}")
        arms.append(arm)
    return Wait(mode, arms)


@dataclass
class Resolution:
    """What resolving an arm means for the workflow."""

    resume: bool  # run workflow code now
    value: Any = None
    error: BaseException | None = None
    losers: list[Arm] = field(default_factory=list)


def resolve(wait: Wait, arm: Arm, *, ok: bool, value: Any = None, error: BaseException | None = None) -> Resolution:
    """Mark ``arm`` done with its outcome and say whether the workflow resumes, and with what."""
    arm.done = True
    if wait.mode == "one":
        return Resolution(True, value, None if ok else error)
    if wait.mode == "select":
        losers = [a for a in wait.arms if not a.done]
        for a in losers:
            a.done = True
        if ok:
            return Resolution(True, Event(arm.name, value, arm.kind), None, losers)
        return Resolution(True, None, error, losers)
    # gather
    if not ok:
        losers = [a for a in wait.arms if not a.done]
        for a in losers:
            a.done = True
        return Resolution(True, None, error, losers)
    wait.results[arm.index] = value
    if len(wait.results) == len(wait.arms):  # every arm has its result (a failure ends above)
        return Resolution(True, [wait.results[a.index] for a in wait.arms])
    return Resolution(False)
