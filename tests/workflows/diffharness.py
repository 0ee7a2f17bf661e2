"""The differential harness: the compiler's oracle.

A workflow runs twice against the same deterministic command oracle:

* natively: the real coroutine ``wf.__wrapped__(*args)`` driven with ``send``/``throw``;
* compiled: ``WorkflowHarness(wf, *args, roundtrip=...)``, which with ``roundtrip=True`` replaces
  the continuation by ``restore(checkpoint(...))`` at every suspension (a simulated restart).

Each run records, step by step, the entries of the side-effect log (``probes.log``/``tick``), the
effects recorded into the step context (reducer calls, sends, subscriptions) and the command the
step ended on; then the outcome (return value, or exception type, args, attributes and notes,
traceback lines, and the same for its whole cause/context chain).
``compare`` reports every difference between two runs.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib
import os
import pathlib
import pickle
import subprocess
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import workflows
from workflows import Cancelled, ChildFailed, Event, ProcedureFailed, Request
from workflows._commands import (
    Command,
    Gather,
    Procedure,
    RequestCommand,
    Select,
    Signal,
    Spawn,
    Timer,
)
from workflows._context import StepContext
from workflows._registry import resolve

from . import probes

WORKFLOW_ID = "wf-1"
MAX_STEPS = 400


def clock(step_index: int) -> float:
    """The workflow clock reading for step ``step_index`` (both runs use the same one)."""
    return 1000.0 + 10.0 * step_index


# ---------------------------------------------------------------------------------------------
# The oracle


@dataclass(frozen=True)
class Send:
    """Resume the workflow with ``value``."""

    value: Any


@dataclass(frozen=True)
class Throw:
    """Raise ``exception`` at the workflow's current await."""

    exception: BaseException


Reply = Send | Throw
History = list[tuple[Command, Reply]]


def procedure_failed(cmd: Command, index: int, cause: BaseException | None = None) -> BaseException:
    """The error a failed procedure (or any other failed command) raises at its await."""
    if isinstance(cmd, Procedure):
        et = type(cause).__name__ if cause is not None else "Oops"
        em = str(cause) if cause is not None else f"failed at suspension {index}"
        return ProcedureFailed(
            f"procedure {cmd.function} failed: {et}: {em}",
            procedure=cmd.function,
            attempts=1,
            error_type=et,
            error_message=em,
            traceback=None,
        )
    if isinstance(cmd, Spawn):
        return ChildFailed(
            f"child {cmd.workflow} failed",
            child_id=f"child-{index}",
            child_type=cmd.workflow,
            error_type="Boom",
            error_message="child failed",
            traceback=None,
        )
    return probes.Boom(index, type(cmd).__name__)


def command_name(cmd: Command) -> str:
    """A short name for a command: its arm name, or its type for select/gather."""
    if isinstance(cmd, (Select, Gather)):
        return type(cmd).__name__
    return cmd.arm_name


def boom(cmd: Command, index: int) -> BaseException:
    """A custom error (with its own ``__reduce__``) for any command."""
    return probes.Boom(index, command_name(cmd))


def oops(cmd: Command, index: int) -> BaseException:
    """A ``ValueError`` subclass for any command."""
    return probes.Oops(index)


def _default_child(cmd: Spawn) -> Any:
    return ("child", cmd.arm_name, cmd.args)


@dataclass(frozen=True)
class Oracle:
    """Deterministic answers to a workflow's commands; a pure function of the command history.

    Attributes:
        signals: payloads per signal name, delivered in order (``None`` once exhausted); a
            ``request(name)`` takes its payloads from here too, as a ``Request`` of that name.
        choose: for the n-th ``select``, the arm that wins (its ``Event.name``, or an index);
            once exhausted the first timer arm wins (else the first arm).
        fail_at: suspension indices (0-based) whose reply is an exception from ``error``.
        fail_when: an extra predicate ``(cmd, index) -> bool`` for failing replies.
        error: builds the exception for a failing reply.
        cancel_at: the suspension index at which ``Cancelled`` is thrown instead.
        limit: from this suspension on, every reply is ``Cancelled("limit")`` (bounds endless
            workflows such as patrol or the day/night cycle).
        results: maps a procedure's computed result (``fn(*args)``) for the procedure's key
            tail, e.g. ``{"fetch": lambda v: v * 3}``, so oracle variants differ in values.
        child: the result of a spawned child.
    """

    signals: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    choose: Sequence[str | int] = ()
    fail_at: frozenset[int] = frozenset()
    fail_when: Callable[[Command, int], bool] | None = None
    error: Callable[[Command, int], BaseException] = procedure_failed
    cancel_at: int | None = None
    limit: int = 200
    results: Mapping[str, Callable[[Any], Any]] = field(default_factory=dict)
    child: Callable[[Spawn], Any] = _default_child

    def with_(self, **changes: Any) -> Oracle:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)

    def __call__(self, cmd: Command, history: History) -> Reply:
        """The reply to ``cmd``, the ``len(history)``-th suspension."""
        index = len(history)
        if index >= self.limit:
            return Throw(Cancelled("limit"))
        if self.cancel_at == index:
            return Throw(Cancelled(f"cancelled at {index}"))
        if index in self.fail_at or (self.fail_when is not None and self.fail_when(cmd, index)):
            return Throw(self.error(cmd, index))
        try:
            return Send(self._value(cmd, history, index))
        except _Failed as f:
            return Throw(f.exception)

    def _value(self, cmd: Command, history: History, index: int) -> Any:
        if isinstance(cmd, Timer):
            return None
        if isinstance(cmd, Signal):
            return self._signal(cmd.name, history)
        if isinstance(cmd, Procedure):
            fn = resolve("procedure", cmd.function)
            try:
                value = fn(*cmd.args, **cmd.kwargs)
            except Exception as e:
                raise _Failed(procedure_failed(cmd, index, e)) from None
            tail = cmd.function.rpartition(":")[2].rpartition(".")[2]
            if tail in self.results:
                value = self.results[tail](value)
            return value
        if isinstance(cmd, Spawn):
            return self.child(cmd)
        if isinstance(cmd, RequestCommand):
            payload = self._signal(cmd.name, history, kind="request")
            return Request(cmd.name, payload, id=f"ask-{index}", to=WORKFLOW_ID)
        if isinstance(cmd, Select):
            n = sum(1 for c, _ in history if isinstance(c, Select))
            arm = self._arm(cmd, n)
            return Event(arm.arm_name, self._value(arm, history, index), arm.kind)
        if isinstance(cmd, Gather):
            return [self._value(c, history, index) for c in cmd.commands]
        raise AssertionError(f"the oracle has no answer for {cmd!r}")

    def _arm(self, cmd: Select, n: int) -> Command:
        if n < len(self.choose):
            want = self.choose[n]
            if isinstance(want, int):
                return cmd.commands[want]
            for c in cmd.commands:
                if c.arm_name == want:
                    return c
            for c in cmd.commands:  # a wanted arm that is not offered: fall back like exhaustion
                if isinstance(c, Timer):
                    return c
            return cmd.commands[0]
        for c in cmd.commands:
            if isinstance(c, Timer):
                return c
        return cmd.commands[0]

    def _signal(self, name: str, history: History, kind: str = "signal") -> Any:
        seen = 0
        own = RequestCommand if kind == "request" else Signal
        for c, r in history:
            if isinstance(c, own) and c.name == name and isinstance(r, Send):
                seen += 1
            elif (
                isinstance(c, Select)
                and isinstance(r, Send)
                and isinstance(r.value, Event)
                and r.value.kind == kind
                and r.value.name == name
            ):
                seen += 1
        payloads = self.signals.get(name, ())
        return payloads[seen] if seen < len(payloads) else None


class _Failed(Exception):
    def __init__(self, exception: BaseException) -> None:
        super().__init__(exception)
        self.exception = exception


# ---------------------------------------------------------------------------------------------
# Runs


@dataclass
class StepRecord:
    """What one step did: log entries, effects, and the command it suspended on (or None)."""

    log: list[Any]
    effects: list[Any]
    command: Command | None


@dataclass
class Trace:
    """A whole run: its steps and its outcome (``("return", v)`` or ``("raise", exc)``)."""

    steps: list[StepRecord] = field(default_factory=list)
    outcome: tuple[str, Any] | None = None
    failure: str | None = None  # the harness itself failed (not the workflow)

    @property
    def commands(self) -> list[Command]:
        """The commands, in order."""
        return [s.command for s in self.steps if s.command is not None]


def run_native(wf: Any, args: Sequence[Any], oracle: Oracle) -> Trace:
    """Drive the real coroutine ``wf.__wrapped__(*args)`` against ``oracle``."""
    key = wf.__workflow_key__
    probes.reset_log()
    trace = Trace()
    history: History = []
    try:
        coro = wf.__wrapped__(*copy.deepcopy(tuple(args)))
    except BaseException as e:  # argument binding errors
        trace.outcome = ("raise", e)
        return trace
    reply: Reply = Send(None)
    try:
        for index in range(MAX_STEPS):
            ctx = StepContext(workflow_id=WORKFLOW_ID, workflow_type=key, now=clock(index))
            cmd: Any = None
            with ctx.active():
                try:
                    if isinstance(reply, Throw):
                        cmd = coro.throw(reply.exception)
                    else:
                        cmd = coro.send(reply.value)
                except StopIteration as e:
                    trace.outcome = ("return", e.value)
                except BaseException as e:
                    trace.outcome = ("raise", e)
            trace.steps.append(StepRecord(probes.take_log(), list(ctx.effects), cmd))
            if trace.outcome is not None:
                return trace
            if not isinstance(cmd, Command):
                trace.failure = f"native coroutine yielded a non-command {cmd!r}"
                return trace
            reply = oracle(cmd, history)
            history.append((cmd, reply))
        trace.failure = f"no outcome after {MAX_STEPS} steps"
        return trace
    finally:
        if trace.outcome is None:
            try:
                coro.close()
            except BaseException:
                pass
            probes.reset_log()


def run_compiled(
    wf: Any, args: Sequence[Any], oracle: Oracle, roundtrip: bool = True, native: bool = False
) -> Trace:
    """Drive the compiled machine through ``WorkflowHarness`` against ``oracle``.

    ``native=True`` drives the harness's own native mode instead (to check the harness itself).
    """
    from workflows.testing import WorkflowHarness

    key = wf.__workflow_key__
    probes.reset_log()
    trace = Trace()
    history: History = []
    try:
        h = WorkflowHarness(
            wf,
            *copy.deepcopy(tuple(args)),
            workflow_id=WORKFLOW_ID,
            workflow_type=key,
            now=clock(0),
            roundtrip=roundtrip,
            native=native,
        )
    except TypeError as e:  # argument binding errors, like the native call
        if "argument" in str(e):
            trace.outcome = ("raise", e)
            return trace
        raise
    seen_effects = 0

    def record() -> None:
        nonlocal seen_effects
        effects = list(h.effects)
        trace.steps.append(StepRecord(probes.take_log(), effects[seen_effects:], h.command))
        seen_effects = len(effects)

    try:
        record()
        for index in range(1, MAX_STEPS):
            if h.done:
                if h.exception is not None:
                    trace.outcome = ("raise", h.exception)
                else:
                    trace.outcome = ("return", h.value)
                return trace
            cmd = h.command
            reply = oracle(cmd, history)
            history.append((cmd, reply))
            h.now = clock(index)
            if isinstance(reply, Throw):
                h.throw(reply.exception)
            else:
                h.send(reply.value)
            record()
        trace.failure = f"no outcome after {MAX_STEPS} steps"
    except Exception as e:  # the harness or the compiler failed, not the workflow
        trace.failure = f"{type(e).__name__}: {e}"
        trace.steps.append(StepRecord(probes.take_log(), [], None))
    finally:
        probes.reset_log()
    return trace


# ---------------------------------------------------------------------------------------------
# Comparison


def norm(x: Any, depth: int = 0) -> Any:
    """A comparable form of a logged value or result (exceptions by type and args)."""
    if depth > 8:
        return repr(x)
    if isinstance(x, BaseException):
        return ("exception", type(x).__qualname__, norm(x.args, depth + 1))
    if isinstance(x, tuple):
        return tuple(norm(i, depth + 1) for i in x)
    if isinstance(x, list):
        return [norm(i, depth + 1) for i in x]
    if isinstance(x, dict):
        return {k: norm(v, depth + 1) for k, v in x.items()}
    if isinstance(x, Event):
        return ("Event", x.name, norm(x.value, depth + 1), x.kind)
    return x


# Traceback entries in these files belong to the drivers (the native run's loop, the harness,
# the compiler's runtime), not to the workflow: they are left out of the comparison.
_DRIVER_FILES = (
    os.path.abspath(__file__),
    os.path.join(os.path.dirname(os.path.abspath(workflows.__file__)), ""),
)


_COMPREHENSION_FRAMES = frozenset({"<listcomp>", "<setcomp>", "<dictcomp>"})


def tb_lines(tb: Any) -> list[tuple[str, int | None, str]]:
    """A traceback's entries as (file name, line, function), without the drivers' frames."""
    out = []
    frames = [frame for frame, _ in traceback.walk_tb(tb)]
    for frame, fs in zip(frames, traceback.extract_tb(tb), strict=True):
        path = os.path.abspath(fs.filename) if os.sep in fs.filename else fs.filename
        if path == _DRIVER_FILES[0] or path.startswith(_DRIVER_FILES[1]):
            continue
        if fs.name in _COMPREHENSION_FRAMES:
            # 3.11 runs a comprehension in a frame of its own, entered from the line where the
            # comprehension starts; since 3.12 it is inlined and the line is the inner one.
            if out and out[-1][0] == os.path.basename(fs.filename):
                out[-1] = (out[-1][0], fs.lineno, out[-1][2])
            else:
                # The traceback starts in the comprehension (an exception it raised and that
                # became another at its end): inlined, that line is in the enclosing function.
                qualname = getattr(frame.f_code, "co_qualname", fs.name)
                enclosing = qualname.rpartition(".<locals>.")[0].rpartition(".")[2] or fs.name
                out.append((os.path.basename(fs.filename), fs.lineno, enclosing))
            continue
        out.append((os.path.basename(fs.filename), fs.lineno, fs.name))
    return out


def chain(e: BaseException | None, depth: int = 0) -> Any:
    """The exception's type, args, attributes (notes included), traceback lines, and its
    ``__cause__``/``__context__`` chain, recursively."""
    if e is None or depth > 6:
        return None
    attrs = {k: norm(v, depth + 1) for k, v in sorted(vars(e).items())} if hasattr(e, "__dict__") else {}
    return (
        type(e).__qualname__,
        norm(e.args),
        attrs,
        tb_lines(e.__traceback__),
        chain(e.__cause__, depth + 1),
        chain(e.__context__, depth + 1),
        e.__suppress_context__,
    )


def _chains_agree(native: Any, compiled: Any) -> bool:
    """Whether two ``chain`` values agree, allowing for one known 3.11 interpreter quirk.

    On 3.11, an exception thrown into a coroutine through awaits loses the traceback entries
    below a coroutine that is handling an exception (the interpreter drops them while chaining
    the context; 3.12 keeps them). The compiled machine keeps them, as 3.12 does: there, a
    native traceback that is a prefix of the compiled one agrees.
    """
    if native is None or compiled is None:
        return native is compiled
    if native[:3] != compiled[:3] or native[6] != compiled[6]:
        return False
    tn, tc = native[3], compiled[3]
    if tn != tc and not (sys.version_info[:2] == (3, 11) and tc[: len(tn)] == tn):
        return False
    return _chains_agree(native[4], compiled[4]) and _chains_agree(native[5], compiled[5])


def outcome_of(trace: Trace, with_chain: bool) -> Any:
    """The comparable outcome of a run."""
    if trace.outcome is None:
        return ("no outcome", trace.failure)
    kind, v = trace.outcome
    if kind == "return":
        return ("return", norm(v))
    if with_chain:
        return ("raise", chain(v))
    return ("raise", type(v).__qualname__, norm(v.args))


def compare(native: Trace, compiled: Trace, with_chain: bool, label: str = "compiled") -> list[str]:
    """Every difference between two runs, as readable lines (empty when they agree)."""
    diffs: list[str] = []
    if native.failure:
        diffs.append(f"native run failed: {native.failure}")
    if compiled.failure:
        diffs.append(f"{label} run failed: {compiled.failure}")
    n = max(len(native.steps), len(compiled.steps))
    for i in range(n):
        a = native.steps[i] if i < len(native.steps) else None
        b = compiled.steps[i] if i < len(compiled.steps) else None
        if a is None or b is None:
            diffs.append(f"step {i}: native {a} vs {label} {b}")
            break
        if norm(a.log) != norm(b.log):
            diffs.append(f"step {i} log: native {a.log!r} vs {label} {b.log!r}")
        if a.effects != b.effects:
            diffs.append(f"step {i} effects: native {a.effects!r} vs {label} {b.effects!r}")
        if a.command != b.command:
            diffs.append(f"step {i} command: native {a.command!r} vs {label} {b.command!r}")
        if diffs:
            break
    oa, ob = outcome_of(native, with_chain), outcome_of(compiled, with_chain)
    if oa != ob and not (with_chain and oa[0] == ob[0] == "raise" and _chains_agree(oa[1], ob[1])):
        diffs.append(f"outcome: native {oa!r} vs {label} {ob!r}")
    return diffs


# ---------------------------------------------------------------------------------------------
# The corpus registry


_UNSET: Any = object()


@dataclass
class Case:
    """One input of a corpus entry: arguments, oracle, and what the native run must do.

    ``raises`` is the exception type the native run must end with (``None``: it returns);
    ``returns`` pins the native return value when given. These keep the corpus honest: an entry
    that crashes for a reason nobody intended is caught before the comparison hides it.
    """

    args: tuple[Any, ...] = ()
    oracle: Oracle = field(default_factory=Oracle)
    raises: type[BaseException] | None = None
    returns: Any = _UNSET
    label: str = ""


@dataclass
class Entry:
    """A corpus workflow and its cases."""

    wf: Any
    cases: list[Case]

    @property
    def name(self) -> str:
        """The workflow's key without the package prefix."""
        return str(self.wf.__workflow_key__).rpartition(".")[2]


def add(wf: Any, *cases: Case) -> Any:
    """Register ``wf`` with its cases in the corpus (at least one case), ``corpus_index.CORPUS``:
    looked up here at each call, so that this module, which the corpus programs import, does not
    reach it (the module's docstring says why)."""
    if not cases:
        cases = (Case(),)
    importlib.import_module(f"{__package__}.corpus_index").CORPUS.append(Entry(wf, list(cases)))
    return wf


def C(*args: Any, **kw: Any) -> Case:  # noqa: N802 - reads like a constructor in the corpus
    """Shorthand: ``C(1, 2, signals=..., raises=...)`` builds a Case with an Oracle."""
    case_keys = {"raises", "returns", "label"}
    oracle_kw = {k: v for k, v in kw.items() if k not in case_keys}
    case_kw = {k: v for k, v in kw.items() if k in case_keys}
    oracle = oracle_kw.pop("oracle", None) or Oracle()
    if oracle_kw:
        oracle = oracle.with_(**oracle_kw)
    return Case(tuple(args), oracle, **case_kw)


def native_expectation_problem(case: Case, trace: Trace) -> str | None:
    """Why a native run does not do what its case says (None if it does)."""
    if trace.failure or trace.outcome is None:
        return f"native run failed: {trace.failure}"
    kind, v = trace.outcome
    if case.raises is None:
        if kind != "return":
            return f"expected a return, the native run raised {type(v).__name__}: {v}"
        if case.returns is not _UNSET and norm(v) != norm(case.returns):
            return f"expected return {case.returns!r}, got {v!r}"
        return None
    if kind != "raise" or not isinstance(v, case.raises):
        return f"expected {case.raises.__name__}, the native run ended with {kind} {v!r}"
    return None


ROOT = pathlib.Path(__file__).resolve().parents[2]


def in_a_new_interpreter(
    script: str, *args: str, stdin: bytes, timeout: float = 120, hash_seed: int | None = None
) -> bytes:
    """Run ``script`` (``python -c``, with ``args``) in a new interpreter that imports this
    checkout, ``stdin`` on its standard input (and ``PYTHONHASHSEED`` set to ``hash_seed`` if
    given); what it wrote to its standard output. Fails the test, with the end of its stderr, if
    it did not exit 0."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = str(hash_seed)
    out = subprocess.run([sys.executable, "-c", script, *args], input=stdin, capture_output=True,
                         cwd=str(ROOT), env=env, timeout=timeout)
    assert out.returncode == 0, out.stderr.decode()[-3000:]
    return out.stdout


# The program of resume_in_a_new_interpreter: argv[1] the module it imports first (or ""),
# argv[2] the form of its answer, its plan pickled on stdin.
RESUME = r"""
import importlib, itertools, pickle, sys
from workflows import CheckpointError
from workflows._compiler import checkpoint, restore, step
from workflows._context import StepContext
from workflows._step import Finished, Suspended

m = importlib.import_module(sys.argv[1]) if sys.argv[1] else None
answer = sys.argv[2]
if answer == "step":
    from tests.workflows import probes
    from tests.workflows.diffharness import norm
plan = pickle.load(sys.stdin.buffer)
steps = plan["steps"]

if plan["workflow"] is not None:  # no checkpoint: start the workflow, answer its checkpoint
    wf = getattr(m, plan["workflow"])
    if plan["harness"]:
        from workflows.testing import WorkflowHarness
        h = WorkflowHarness(wf, *plan["args"], roundtrip=False)
        for _ in range(steps - 1):
            h.fire_timer("t")
        assert not h.done, h
        sys.stdout.buffer.write(h.checkpoint())
    else:
        cont = wf.start(*plan["args"])
        with StepContext(workflow_id=plan["workflow_id"], workflow_type=plan["workflow_type"],
                         now=plan["now"]).active():
            r = step(cont)
            for _ in range(steps - 1):
                r = step(cont, send=None)
        assert isinstance(r, Suspended), r
        sys.stdout.buffer.write(checkpoint(cont))
    raise SystemExit(0)

out = []
for blob, workflow_type, now, kind, payload in plan["resumes"]:
    if kind == "send":
        payload = pickle.loads(payload)
    if answer == "step":
        probes.reset_log()
    try:
        cont = restore(blob)
    except CheckpointError as e:
        if answer != "outcome":
            raise
        out.append(("refused", e.variable, str(e)))
        continue
    for i in itertools.count() if steps is None else range(steps):
        ctx = StepContext(workflow_id=plan["workflow_id"], workflow_type=workflow_type,
                          now=now + i * plan["tick"])
        with ctx.active():
            if i == 0 and kind == "throw":
                r = step(cont, throw=payload)
            else:
                r = step(cont, send=payload if i == 0 else None)
        if not isinstance(r, Suspended):
            break
        if plan["roundtrip"]:
            cont = restore(checkpoint(cont))
    if plan["finish"]:
        assert isinstance(r, Finished), r
    if answer == "value":
        out.append(r.value)
    elif answer == "repr":
        out.append(repr(r.value))
    elif answer == "str":
        out.append(str(r.value))
    elif answer == "outcome":
        out.append(("finished", r.value))
    else:
        if isinstance(r, Suspended):
            res = ("suspended", r.command)
        elif isinstance(r, Finished):
            res = ("finished", norm(r.value))
        else:
            res = ("raised", type(r.exception).__qualname__, norm(r.exception.args))
        out.append((norm(probes.take_log()), list(ctx.effects), res))
sys.stdout.buffer.write(pickle.dumps(out))
"""


def resume_in_a_new_interpreter(
    checkpoint: bytes | Sequence[tuple[bytes, str, float, str, Any]] | None,
    *,
    module: str | None = None,
    workflow: str | None = None,
    args: Sequence[Any] = (),
    harness: bool = True,
    workflow_id: str = "w",
    workflow_type: str | None = None,
    now: float = 1.0,
    tick: float = 0.0,
    steps: int | None = 1,
    roundtrip: bool = False,
    finish: bool = False,
    answer: Literal["value", "repr", "str", "outcome", "step"] = "value",
    hash_seed: int | None = None,
    timeout: float = 120,
) -> Any:
    """Restore ``checkpoint`` in a new interpreter, as after a restart, and step it there.

    The new interpreter imports ``module`` first (None: nothing of the tests, the restore imports
    what the checkpoint names), then restores the checkpoint and takes up to ``steps`` steps
    (None: as many as it takes), each sent None in a ``StepContext`` of ``workflow_id`` and
    ``workflow_type`` whose clock reads ``now``, then ``tick`` more at each further step; it stops
    at the first step that does not suspend, after a ``restore(checkpoint(...))`` of the
    continuation between steps if ``roundtrip``, and fails the test unless that last step finished
    if ``finish``. What it answers, from its last step ``r``:

    * ``"value"``: ``r.value``; ``"repr"``: ``repr(r.value)``; ``"str"``: ``str(r.value)``, each
      made there (also of values that do not pickle);
    * ``"outcome"``: ``("finished", r.value)``, or ``("refused", variable, message)`` if the
      restore raised a CheckpointError (which otherwise fails the test);
    * ``"step"``: the step as the differential harness records it: the ``probes`` log (reset
      before the restore), the step's effects and ``("suspended", command)``,
      ``("finished", value)`` or ``("raised", qualname, args)``, normalised by ``norm``.

    ``checkpoint`` may be a list of ``(checkpoint, workflow_type, now, "send", pickled value)`` or
    ``(checkpoint, workflow_type, now, "throw", exception)``, each resumed (its first step sent
    that value or thrown that exception) in the same interpreter: the answer is their list.

    With ``checkpoint`` None, the new interpreter instead starts ``workflow`` (a name of
    ``module``) with ``args``, takes ``steps`` steps, and answers the checkpoint it is suspended
    at: through ``WorkflowHarness(..., roundtrip=False)`` (the steps after its first fire the
    timer "t") if ``harness``, else stepping ``start(*args)`` by hand, sent None, in one
    ``StepContext`` as above. Under ``PYTHONHASHSEED=hash_seed`` if given.
    """
    if checkpoint is None:
        if workflow is None or module is None or steps is None:
            raise TypeError("starting a workflow takes its module, its name and a number of steps")
        resumes: list[tuple[bytes, str, float, str, Any]] = []
    elif isinstance(checkpoint, bytes):
        if workflow_type is None:
            raise TypeError("resuming a checkpoint takes the workflow_type of its steps")
        resumes = [(checkpoint, workflow_type, now, "send", pickle.dumps(None))]
    else:
        resumes = list(checkpoint)
    plan = {
        "workflow": workflow if checkpoint is None else None, "args": tuple(args),
        "harness": harness, "resumes": resumes, "workflow_id": workflow_id,
        "workflow_type": workflow_type, "now": now, "tick": tick, "steps": steps,
        "roundtrip": roundtrip, "finish": finish,
    }
    out = in_a_new_interpreter(RESUME, module or "", answer, stdin=pickle.dumps(plan),
                               timeout=timeout, hash_seed=hash_seed)
    if checkpoint is None:
        return out
    answers = pickle.loads(out)
    return answers[0] if isinstance(checkpoint, bytes) else answers
