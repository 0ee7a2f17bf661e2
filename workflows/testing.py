"""A pure stepping harness for unit-testing workflows: no database, no actors, no threads.

Example::

    from workflows.testing import WorkflowHarness

    h = WorkflowHarness(auction, 7, "carol")
    assert h.command == procedure(get_price, 7)
    h.send(100)                                   # the procedure's result
    h.send(Event("end", None, "timer"))           # the select's winner
    assert h.result() == {"winner": None, "price": 100}

By default the continuation is checkpointed and restored after every suspension
(``roundtrip=True``), as if the process restarted there, so a workflow that only works without a
restart fails in its unit test. ``native=True`` drives the original coroutine instead of the
compiled state machine, which is what the compiler's differential tests compare against.
"""

from __future__ import annotations

from typing import Any

from ._commands import Command
from ._compiler import Continuation, WorkflowFunction, checkpoint, restore
from ._context import Effect
from ._errors import WorkflowError
from ._instance import REQUEST, Arrival, Decision, StepOutcome, Wait, WorkflowInstance
from ._step import Finished, Raised, StepResult, Suspended
from ._talk import Request

__all__ = ["WorkflowHarness"]


class WorkflowHarness:
    """Run one workflow step by step, answering its commands by hand.

    The first step runs at construction. Each step runs inside a fresh ``StepContext`` with the
    harness's ``workflow_id``, ``workflow_type`` and ``now``, and the effects it records
    (``reducer``, ``send``, ``subscribe``...) are appended to ``effects``.

    Args:
        wf: the ``@workflow`` function.
        *args: its arguments.
        workflow_id: what ``workflow_id()`` returns inside the workflow.
        workflow_type: what ``info().workflow_type`` returns (default: the workflow's key).
        now: the clock reading of the first step (settable later through ``h.now``).
        native: drive the original coroutine (``wf.__wrapped__``) instead of the compiled code.
        roundtrip: after every suspension, replace the continuation by
            ``restore(checkpoint(continuation))`` (compiled mode only).
        scheduled_at: what ``info().scheduled_at`` returns (a schedule's tick; default None).
    """

    def __init__(
        self,
        wf: WorkflowFunction[..., Any],
        *args: Any,
        workflow_id: str = "test",
        workflow_type: str | None = None,
        now: float = 0.0,
        native: bool = False,
        roundtrip: bool = True,
        scheduled_at: float | None = None,
    ) -> None:
        if not isinstance(wf, WorkflowFunction):
            raise TypeError(
                f"WorkflowHarness needs a @workflow function, got {wf!r}; decorate the async def "
                "with @workflow"
            )
        self.workflow = wf
        self.workflow_id = workflow_id
        self.workflow_type = workflow_type if workflow_type is not None else wf.__workflow_key__
        self.now = now
        self.native = native
        self.roundtrip = roundtrip and not native
        self.command: Command | None = None
        self.commands: list[Command] = []
        self.effects: list[Effect] = []
        self.done = False
        self.value: Any = None
        self.exception: BaseException | None = None
        self.last: StepResult | None = None
        self._timer_ids = 0
        self._coro: Any = None
        self._cont: Continuation | None = None
        if native:
            self._coro = wf.__wrapped__(*args)
        else:
            self._cont = wf.start(*args)
        # The same instance the runtime steps: its rules decide what signal(), fire_timer() and
        # cancel() resume. Children are not created here (spawn is answered by hand).
        self.instance = WorkflowInstance(
            self._coro if native else self._cont,
            workflow_id=workflow_id,
            workflow_type=self.workflow_type,
            scheduled_at=scheduled_at,
            stepper=self._native_step if native else WorkflowInstance.compiled_step,
            checkpointing=self.roundtrip,
            spawning=False,
        )
        first = self.instance.decide()
        assert first is not None
        self._run(first)

    # -- public API

    @property
    def continuation(self) -> Continuation:
        """The compiled continuation (compiled mode only)."""
        if self._cont is None:
            raise WorkflowError("a native harness (native=True) has no continuation")
        return self._cont

    def checkpoint(self) -> bytes:
        """The checkpoint bytes of the current continuation (compiled mode only)."""
        return checkpoint(self.continuation)

    @property
    def wait(self) -> Wait | None:
        """What the workflow waits for now, as the runtime sees it (None once it has finished)."""
        return self.instance.wait

    def send(self, value: Any = None) -> StepResult:
        """Resume the workflow with ``value`` as the result of the command it awaits."""
        self._check_running("send")
        return self._step(value, None)

    def signal(self, name: str, payload: Any = None) -> StepResult | None:
        """Deliver signal ``name`` as the runtime would: it resolves the first pending arm that
        awaits it (a ``select`` resumes with ``Event(name, payload)``, a ``gather`` records it).
        Returns the step it ran, or None if the workflow does not await that signal now (the
        runtime would buffer it; the harness does not)."""
        self._check_running("signal")
        return self._offer(Arrival.signal(name, payload))

    def ask(self, name: str, payload: Any = None, *, ask_id: str = "ask-1") -> StepResult | None:
        """Deliver an ask ``name`` as the runtime would: the first pending ``request(name)``
        takes it as a ``Request`` (its replies are ``Reply`` values among ``effects``). None if
        the workflow does not await that request now."""
        self._check_running("ask")
        return self._offer(Arrival(REQUEST, name, value=Request(name, payload, ask_id, self.workflow_id)))

    def fire_timer(self, name: str) -> StepResult | None:
        """Fire the armed timer ``name`` as the runtime would; None if no such timer is armed."""
        self._check_running("fire_timer")
        arm = self.wait.arm_for_timer_name(name) if self.wait is not None else None
        if arm is None or arm.timer_id is None:
            armed = [a.name for a in self.wait.pending() if a.kind == "timer"] if self.wait else []
            raise WorkflowError(
                f"fire_timer({name!r}): workflow {self.workflow_type} has no timer of that name "
                f"armed now (armed: {armed}); it awaits {self.command!r}"
            )
        return self._offer(Arrival.timer(arm.timer_id, arm.due_at or 0.0))

    def throw(self, exc: BaseException) -> StepResult:
        """Raise ``exc`` at the workflow's current await (as a failed command would)."""
        self._check_running("throw")
        if isinstance(exc, type) and issubclass(exc, BaseException):
            exc = exc()
        if not isinstance(exc, BaseException):
            raise TypeError(f"throw() needs an exception instance, got {exc!r}")
        return self._step(None, exc)

    def cancel(self, reason: str | None = None) -> StepResult:
        """Cancel the workflow: raise ``Cancelled(reason)`` at its current await."""
        self._check_running("cancel")
        decision = self.instance.decide(cancelled=True, cancel=reason)
        assert decision is not None
        return self._run(decision)

    def result(self) -> Any:
        """The workflow's return value; raises its exception if it failed.

        Raises:
            WorkflowError: the workflow is still suspended.
        """
        if not self.done:
            raise WorkflowError(
                f"workflow {self.workflow_type} has not finished: it awaits {self.command!r}; "
                "answer it with send(...) or throw(...) first"
            )
        if self.exception is not None:
            raise self.exception
        return self.value

    def __repr__(self) -> str:
        mode = "native" if self.native else "compiled"
        state = (
            f"awaiting {self.command!r}"
            if not self.done
            else (f"raised {self.exception!r}" if self.exception else f"returned {self.value!r}")
        )
        return f"<WorkflowHarness {self.workflow_type} ({mode}) {state}>"

    # -- internals

    def _check_running(self, what: str) -> None:
        if self.done:
            outcome = (
                f"raised {type(self.exception).__name__}: {self.exception}"
                if self.exception is not None
                else f"returned {self.value!r}"
            )
            raise WorkflowError(
                f"cannot {what}(): workflow {self.workflow_type} has already finished ({outcome}); "
                "there is no await left to resume"
            )

    def _step(self, value: Any, exc: BaseException | None) -> StepResult:
        return self._run(Decision(True, send=value, throw=exc))

    def _offer(self, arrival: Arrival) -> StepResult | None:
        decision = self.instance.decide([arrival])
        if decision is None:
            return None
        if not decision.resume:
            self.instance.progressed(decision)  # a gather recorded it
            return None
        return self._run(decision)

    def _run(self, decision: Decision) -> StepResult:
        outcome: StepOutcome = self.instance.run(decision, now=self.now)
        self.effects.extend(outcome.effects)
        if outcome.keep_continuation:
            assert isinstance(outcome.result, Raised)
            raise outcome.result.exception  # the checkpoint failed: raised where it happened
        self.instance.committed(outcome)
        r = outcome.result
        self.last = r
        if isinstance(r, Suspended):
            self.command = r.command
            self.commands.append(r.command)
            assert outcome.wait is not None
            for arm in outcome.wait.arms:
                if arm.kind == "timer":  # the runtime learns its id from the commit
                    self._timer_ids += 1
                    arm.timer_id = self._timer_ids
            if self.roundtrip:
                assert outcome.checkpoint is not None
                self._cont = restore(outcome.checkpoint)
                self.instance.continuation = self._cont
        else:
            self.command = None
            self.done = True
            if isinstance(r, Finished):
                self.value = r.value
            elif isinstance(r, Raised):
                self.exception = r.exception
        return r

    @staticmethod
    def _native_step(coro: Any, value: Any, exc: BaseException | None) -> StepResult:
        try:
            yielded = coro.throw(exc) if exc is not None else coro.send(value)
            while not isinstance(yielded, Command):
                # Same contract as the compiled machine: awaiting a non-command is an error
                # raised inside the workflow, at that await.
                err = WorkflowError(
                    "workflows can only await workflow commands or @workflow functions: got "
                    f"{type(yielded).__qualname__} {yielded!r}"
                )
                yielded = coro.throw(err)
        except StopIteration as stop:
            return Finished(stop.value)
        except BaseException as e:  # the workflow's own exception (Cancelled included)
            return Raised(e)
        return Suspended(yielded)
