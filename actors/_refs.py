"""``WorkflowRef``: a handle on one workflow, made by the system (``start``, ``get``)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from typing import TYPE_CHECKING, Any, Generic, TypeVar, cast

from persistence import (
    CANCEL,
    FINISHED,
    RUNNING,
    SIGNAL,
    WorkflowRecord,
    loads,
)
from workflows import Cancelled, Status, WorkflowFailed

from . import _history, _talk
from ._aio import read_late, read_wait, read_within
from ._errors import WorkflowNotRunning, check_timeout
from ._history import HistoryEntry
from ._info import WorkflowInfo, info_from_record, waiting_text
from ._outcomes import Outcome

if TYPE_CHECKING:
    from ._system import ActorSystem


R = TypeVar("R")


_REF_TOKEN = object()


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
        if reason is not None and not isinstance(reason, str):
            raise TypeError(f"cancel() reason must be a str or None, got {reason!r}")
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

    def debug_fire_timer(self, name: str, timeout: float | None = 30.0) -> None:
        """Fire the armed timer ``name`` now; an unknown name raises ``TimerNotArmed``."""
        sysm = self._system
        sysm._check_open()
        _talk.check_name(name, "timer")
        check_timeout(timeout, "debug_fire_timer", nothing_sent=True)
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
        _history.check_page(limit, before)
        rows, first = self._system._rt.store.history_page(self.id, limit, before)
        return _history.entries(rows, first)

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
        check_timeout(timeout, "result")
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
                rec = read_within(self._system, None if deadline is None else deadline - time.monotonic(),
                                  f"result() of workflow {self.id!r}", self._record)
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

    async def status_async(self) -> Status:
        """``status`` for asyncio code, without blocking the loop (the read runs on the system's
        executor)."""
        return await self._system._aio.run(self._system._closed_error, self.status)

    async def info_async(self) -> WorkflowInfo:
        """``info`` for asyncio code, without blocking the loop."""
        return await self._system._aio.run(self._system._closed_error, self.info)

    async def history_async(self, limit: int | None = None, before: int | None = None) -> list[HistoryEntry]:
        """``history`` for asyncio code, without blocking the loop."""
        return await self._system._aio.run(self._system._closed_error, self.history, limit, before)

    async def debug_send_signal_async(self, name: str, payload: Any = None) -> None:
        """``debug_send_signal`` for asyncio code, without blocking the loop."""
        await self._system._aio.run(self._system._closed_error, self.debug_send_signal, name, payload)

    async def debug_fire_timer_async(self, name: str, timeout: float | None = 30.0) -> None:
        """``debug_fire_timer`` for asyncio code, without blocking the loop."""
        await self._system._aio.run(self._system._closed_error, self.debug_fire_timer, name, timeout)

    async def result_async(self, timeout: float | None = None) -> R:
        """``result`` for asyncio code: the return value, awaited without blocking the loop.

        No thread waits for the workflow: the step that finishes it completes an asyncio future
        on this loop (``call_soon_threadsafe``), so any number of these may be pending at once.
        Only the short reads of the workflow's row run on the system's executor. The row is read
        again now and then even without a wake-up (after 0.5 s, doubling up to 5 s), and at once
        when the system shuts down (``SystemClosed``). Raises as ``result`` does.
        """
        check_timeout(timeout, "result_async")
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
                wait = read_wait(sysm, None if deadline is None else deadline - loop.time())
                late = read_late(sysm, f"result_async() of workflow {self.id!r}")
                rec = await sysm._aio.run_within(sysm._closed_error, wait, late, self._record)
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
            f"(status {rec.status}, waiting on {waiting_text(rec.waiting_on)})"
        )

    def _outcome(self, rec: WorkflowRecord | Outcome) -> R:
        """The result of a finished workflow's record, or the error it ended with, raised."""
        if rec.status == "completed":
            # What this workflow returned (its R), or None when it returned nothing.
            return cast(R, loads(rec.result) if rec.result is not None else None)
        err = json.loads(rec.error or "{}")
        if rec.status == "cancelled":
            # The reason the cancel gave (None: none); a record written without it, by its message.
            raise Cancelled(
                err["reason"] if "reason" in err else (err.get("message") or None), workflow_id=self.id
            )
        raise WorkflowFailed(
            f"workflow {self.id!r} failed: {err.get('type')}: {err.get('message')}",
            workflow_id=self.id,
            error_type=err.get("type", ""),
            error_message=err.get("message", ""),
            traceback=err.get("traceback", ""),
        )

    def _record(self) -> WorkflowRecord:
        self._system._check_open()  # SystemClosed, as documented, not the store's own error
        rec = self._system._rt.store.load_workflow(self.id)
        if rec is None:
            raise self._system._unknown(self.id)
        return rec


