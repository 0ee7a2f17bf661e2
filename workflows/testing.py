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
from ._compiler import Continuation, WorkflowFunction, checkpoint, restore, step
from ._context import Effect, StepContext
from ._errors import Cancelled, WorkflowError
from ._step import Finished, Raised, StepResult, Suspended

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
    """

    def __init__(
        self,
        wf: WorkflowFunction,
        *args: Any,
        workflow_id: str = "test",
        workflow_type: str | None = None,
        now: float = 0.0,
        native: bool = False,
        roundtrip: bool = True,
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
        self._coro: Any = None
        self._cont: Continuation | None = None
        if native:
            self._coro = wf.__wrapped__(*args)
        else:
            self._cont = wf.start(*args)
        self._step(None, None)

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

    def send(self, value: Any = None) -> StepResult:
        """Resume the workflow with ``value`` as the result of the command it awaits."""
        self._check_running("send")
        return self._step(value, None)

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
        return self.throw(Cancelled(reason))

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
        ctx = StepContext(
            workflow_id=self.workflow_id, workflow_type=self.workflow_type, now=self.now
        )
        with ctx.active():
            r = self._native_step(value, exc) if self.native else self._compiled_step(value, exc)
        self.effects.extend(ctx.effects)
        self.last = r
        if isinstance(r, Suspended):
            self.command = r.command
            self.commands.append(r.command)
            if self.roundtrip:
                assert self._cont is not None
                self._cont = restore(checkpoint(self._cont))
        else:
            self.command = None
            self.done = True
            if isinstance(r, Finished):
                self.value = r.value
            elif isinstance(r, Raised):
                self.exception = r.exception
        return r

    def _compiled_step(self, value: Any, exc: BaseException | None) -> StepResult:
        assert self._cont is not None
        return step(self._cont, value, exc)

    def _native_step(self, value: Any, exc: BaseException | None) -> StepResult:
        coro = self._coro
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
