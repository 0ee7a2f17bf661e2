"""The requests other processes leave for the owner of a workflow (`wf signal`, `wf cancel`,
`wf fire-timer`, `wf ask`, `wf prune`, the web view's buttons), carried out in order.

A signal or cancel is appended to the inbox in the same transaction that deletes its request, and
a fire-timer request is deleted by the step that takes its timer, so a crash in between cannot
carry one out twice. A request is deleted without that only when it cannot be carried out at all
(an unknown or finished workflow, no such timer, a payload that is not JSON). One that finds the
inbox full stays, with the requests behind it for the same workflow, and is tried again until the
workflow has room; one that meets a storage fault (disk full, an I/O error) stays the same way,
and is tried again with backoff until storage recovers.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING

from persistence import (
    CANCEL,
    SIGNAL,
    ExternalRow,
    InboxFull,
    PersistenceError,
    UnknownWorkflowId,
    WorkflowFinished,
    dumps,
)

from . import _talk
from ._errors import TimerNotArmed, UnknownWorkflow, WorkflowNotRunning

if TYPE_CHECKING:
    from ._runtime import Runtime
    from ._system import ActorSystem

_EXTERNAL_BACKOFF = (0.05, 2.0)
# Errors of a request itself: it can never be carried out, so it is deleted (and logged). A
# TypeError is the request's too (an ask with an empty name, left by an older wf): kept, it
# failed every pass and held up every request behind it.
_REQUEST_ERRORS = (UnknownWorkflowId, WorkflowFinished, UnknownWorkflow, WorkflowNotRunning,
                   TimerNotArmed, ValueError, TypeError)
# A pass left a fire-timer request to the step that takes its timer: look again soon.
_PENDING_STEP = Exception("a fire-timer request waits for its step")


def _queue(r: ExternalRow) -> str:
    """What a request waiting for room in its workflow's inbox holds back: the requests of the
    same queue behind it (a signal: those of its name; an ask: the asks; else its kind)."""
    return f"signal {r.name}" if r.kind == "signal" else r.kind


class Requests:
    """The `wf` requests a system carries out: those of its workflows (a prune: the leader's)."""

    def __init__(self, system: ActorSystem, rt: Runtime) -> None:
        self._system = system
        self._rt = rt
        self._log = system._log
        # Requests waiting for room in their workflow's inbox (retried).
        self.waiting: set[int] = set()
        # Requests kept after a storage fault (disk full, I/O error), retried from this time on
        # (monotonic; None: none is kept), with the backoff of the next retry.
        self.retry_at: float | None = None
        self._backoff = _EXTERNAL_BACKOFF[0]

    def pending(self) -> bool:
        """Requests not carried out yet, and not waiting for room in a full inbox (those wait
        for the workflow, not for the system): ``idle()`` is false while there are."""
        return any(r.seq not in self.waiting and self.mine(r) for r in self._rt.store.take_external(0))

    def mine(self, r: ExternalRow) -> bool:
        """A `wf` request this node carries out: its workflow's (a prune: the leader's)."""
        return self._system._leads() if r.kind == "prune" else self._rt.owns(r.workflow_id)

    def take(self) -> None:
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
        rows = [r for r in self._rt.store.take_external(0) if self.mine(r)]
        if not rows:
            self._carry_out(rows)  # the bookkeeping of none: not work (``idle``)
            return
        # Counted as work from before any request's row goes until its workflow is woken (until
        # then ``idle`` sees the rows themselves, ``pending``).
        self._rt.work.inc()
        try:
            self._carry_out(rows)
        finally:
            self._rt.work.dec()

    def _carry_out(self, rows: list[ExternalRow]) -> None:
        done: list[int] = []
        waiting: set[int] = set()
        held: set[str] = set()  # workflows with a request waiting: the later ones wait behind it
        full: dict[str, set[str]] = {}  # of those, waiting for room only: what waits (_queue)
        stored_fault: BaseException | None = None
        for r in rows:
            # Behind a request waiting for room wait only those of its queue (a signal's name
            # keeps its order, asks theirs): a cancel or a timer's firing needs no room, an ask
            # has room of its own, and a signal the workflow awaits now is taken in a full inbox,
            # as for `cancel()`, `debug_fire_timer()`, `ask()` and `signal()`. Else a workflow
            # that never takes what fills its inbox could not be cancelled with `wf cancel`,
            # moved on with `wf fire-timer`, asked with `wf ask`, nor given what it awaits.
            if r.workflow_id in held and _queue(r) in full.get(r.workflow_id, {_queue(r)}):
                waiting.add(r.seq)
                continue
            if r.kind == "prune":
                # Carried out by retention, batch by batch; it deletes the request when done.
                self._system._retention.request(r.seq, r.payload)
                continue
            try:
                payload = json.loads(r.payload) if r.payload is not None else None
                if r.kind in ("signal", "cancel"):
                    kind, name = (SIGNAL, r.name or "") if r.kind == "signal" else (CANCEL, "cancel")
                    d = self._rt.store.append_inbox(
                        r.workflow_id, kind, name, dumps(payload), at=self._system.clock.now(), external_seq=r.seq
                    )
                    self._rt.wake([d])
                    if kind == SIGNAL and self._rt.metrics is not None:
                        self._rt.metrics.signal_sent("client")  # `wf signal`: a client's
                    self._log.info("external_request_done", kind=r.kind, workflow_id=r.workflow_id, name=r.name)
                    continue  # its row went with the append
                if r.kind == "ask":  # stored by its ask id: carried out again after a crash, it asks once
                    _talk.carry_out_external_ask(self._system, r.workflow_id, r.name or "", payload)
                    self._log.info("external_request_done", kind=r.kind, workflow_id=r.workflow_id, name=r.name)
                elif r.kind == "fire_timer":
                    self._system._fire_timer(r.workflow_id, r.name or "", 30.0, external_seq=r.seq)
                    self._log.info("external_request_done", kind=r.kind, workflow_id=r.workflow_id, name=r.name)
                    # Its row goes with the step that takes the timer; until then it may be read
                    # again (the actor knows it), and a step that faults leaves it to retry.
                    stored_fault = stored_fault or _PENDING_STEP
                    continue
            except InboxFull as e:
                held.add(r.workflow_id)
                full.setdefault(r.workflow_id, set()).add(_queue(r))
                waiting.add(r.seq)
                if r.seq not in self.waiting:  # said once, not at every retry
                    self._log.warning("external_request_waiting", kind=r.kind, workflow_id=r.workflow_id, error=str(e))
                continue
            except _REQUEST_ERRORS as e:
                # A fire-timer read again before the step that took its timer committed (that
                # step deletes it) finds the workflow past it: carried out, not failed.
                if r.kind != "fire_timer" or self._kept(r.seq):
                    self._log.warning("external_request_failed", kind=r.kind, workflow_id=r.workflow_id, error=str(e))
            except (PersistenceError, TimeoutError) as e:
                # A storage fault, not the request's: keep it (it was acknowledged), and the
                # requests behind it for the same workflow (of every kind), for a retry.
                held.add(r.workflow_id)
                full.pop(r.workflow_id, None)
                if stored_fault is None or stored_fault is _PENDING_STEP:
                    stored_fault = e
                continue
            done.append(r.seq)
        self.waiting = waiting
        if done:
            try:
                self._rt.store.delete_external(done)
            except PersistenceError as e:
                stored_fault = stored_fault if stored_fault not in (None, _PENDING_STEP) else e
        self._retry(stored_fault)

    def _kept(self, seq: int) -> bool:
        """True if `wf` request ``seq`` is still in the database (not yet carried out)."""
        return any(x.seq == seq for x in self._rt.store.take_external(seq - 1)[:1])

    def _retry(self, fault: BaseException | None) -> None:
        """Schedule the next pass over kept requests (backoff doubling up to its bound), logged
        once per episode of storage faults; or end the episode."""
        if fault is None:
            if self.retry_at is not None and self._backoff > _EXTERNAL_BACKOFF[0]:
                self._log.info("external_requests_resumed", db=self._system._shown_db)
            self.retry_at, self._backoff = None, _EXTERNAL_BACKOFF[0]
            return
        if fault is not _PENDING_STEP:
            if self._backoff == _EXTERNAL_BACKOFF[0]:
                self._log.warning("external_requests_kept", db=self._system._shown_db, error=str(fault),
                            retry="with backoff, until storage recovers")
            self._backoff = min(self._backoff * 2, _EXTERNAL_BACKOFF[1])
        self.retry_at = time.monotonic() + self._backoff
