"""Clients talking to a running workflow: ``ref.published`` and ``ref.ask`` (SPEC §12).

Both read the store, never the workflow's actor: a passivated or finished workflow, or one
another node of a cluster runs, answers the same way. A waiting caller is woken by the commit
that publishes or replies (``Runtime.news``: in this process directly; on a cluster, through
the "done:" notices a node sends to the nodes that said they wait on the workflow), and rereads
the row now and then in case a notice was lost (after 0.5 s, doubling up to 5 s).

An ask is durable before ``ask`` waits: its row and its request (an inbox row of kind
``request``) commit in one transaction. Asked again with the same ``ask_id`` (a caller that
crashed and retries), the stored ask is found and its reply returned; nothing is asked twice.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from persistence import (
    ASK_ENDED,
    ASK_OK,
    AskRow,
    Delivered,
    InboxFull,
    Promise,
    StoreClosed,
    UnknownWorkflowId,
    WorkflowFinished,
    dumps,
    loads,
)
from persistence._serialization import check_loads
from workflows._errors import check_printable, check_text
from workflows._talk import Request

from ._aio import read_late, read_wait, read_within
from ._errors import AskFailed, NothingPublished, SystemClosed, WorkflowNotRunning, check_timeout
from ._info import waiting_text

if TYPE_CHECKING:
    from persistence import Store

    from ._aio import AsyncBridge
    from ._clock import Clock
    from ._errors import UnknownWorkflow
    from ._log import Log


T = TypeVar("T")

class Runtime(Protocol):
    """What this module uses of the system's runtime (``_system.Runtime``)."""

    @property
    def store(self) -> Store: ...
    @property
    def commit_timeout(self) -> float: ...
    @property
    def metrics(self) -> Any: ...  # an ``actors._metrics.Metrics``, or None when metrics are off
    @property
    def workflow_log(self) -> Log: ...

    def await_finish(self, workflow_id: str) -> Promise[None]: ...
    def forget_finish(self, workflow_id: str, p: Promise[None]) -> None: ...
    def wake(self, delivered: Iterable[Delivered]) -> None: ...
    def after_commit(self, written: Promise[T], then: Callable[[Promise[T]], None]) -> None: ...
    def written(self, promise: Promise[T], what: str, timeout: float | None = None,
                then: str | None = None) -> T: ...


class ActorSystem(Protocol):
    """What this module uses of ``ActorSystem`` (which imports it)."""

    @property
    def _rt(self) -> Runtime: ...
    @property
    def _aio(self) -> AsyncBridge: ...
    @property
    def clock(self) -> Clock: ...
    @property
    def db(self) -> str: ...
    @property
    def _shown_db(self) -> str: ...
    @property
    def _closed(self) -> bool: ...

    def _check_open(self) -> None: ...
    def _closed_error(self) -> SystemClosed: ...
    def _unknown(self, workflow_id: str) -> UnknownWorkflow: ...
    def _type_of(self, workflow_id: str) -> str | None: ...


# Rereads of a waiting caller without a wake-up: after this many seconds, doubling up to the max.
RECHECK = 0.5
RECHECK_MAX = 5.0
_MISSING = object()


def new_ask_id() -> str:
    return "ask-" + os.urandom(8).hex()


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise TypeError(f"{what} name must be a non-empty string, got {name!r}")
    check_text(name, f"{what} name")
    return name


class _Waiting:
    """One caller's wait for news of a workflow (a publish, a reply, its end)."""

    def __init__(self, rt: Runtime, workflow_id: str) -> None:
        self.rt = rt
        self.workflow_id = workflow_id
        self.woken: Promise[None] = rt.await_finish(workflow_id)

    def renew(self) -> None:
        """Register for the next news (before the next read, so news between the two wakes)."""
        self.rt.forget_finish(self.workflow_id, self.woken)
        self.woken = self.rt.await_finish(self.workflow_id)

    def close(self) -> None:
        self.rt.forget_finish(self.workflow_id, self.woken)


# -- ask ---------------------------------------------------------------------------------------
def start_ask(
    sysm: ActorSystem, workflow_id: str, name: str, payload: Any, ask_id: str | None,
    timeout: float | None = None, *, warn_full: bool = True,
) -> tuple[str, AskRow | None]:
    """Store the ask (or find the one stored under ``ask_id``); ``(ask_id, row found)``,
    waiting for the storage up to ``timeout`` seconds (the ask's) at most. ``warn_full``: an
    ask refused by a full inbox is logged (not for a `wf ask`, which waits for room, and says so
    once)."""
    sysm._check_open()
    check_name(name, "ask")
    if ask_id is None:
        ask_id = new_ask_id()
    elif not isinstance(ask_id, str) or not ask_id:
        raise TypeError(f"ask() ask_id must be a non-empty string or None, got {ask_id!r}")
    check_printable(ask_id, "ask() ask_id")
    try:
        blob = dumps(Request(name, payload, ask_id, workflow_id))
    except Exception as e:
        raise TypeError(f"ask {name!r} to {workflow_id!r}: payload cannot be pickled ({e})") from e
    try:
        check_loads(blob, payload)
    except Exception as e:
        raise TypeError(f"ask {name!r} to {workflow_id!r}: payload cannot be loaded back ({e})") from e
    rt = sysm._rt
    try:
        written = rt.store.submit_ask(workflow_id, ask_id, name, blob, at=sysm.clock.now())
        rt.after_commit(written, lambda p: _wake(rt, p))
        row, _ = rt.written(
            written, f"ask {name!r} (id {ask_id!r}) to workflow {workflow_id!r}", timeout,
            then=f"ask again with ask_id={ask_id!r} to wait for its reply (it is asked once)",
        )
    except UnknownWorkflowId:
        raise sysm._unknown(workflow_id) from None
    except WorkflowFinished as e:
        raise WorkflowNotRunning(workflow_id, e.status, f"ask {name!r}") from e
    except InboxFull as e:
        # Misuse worth a warning (SPEC §8) beside the caller's error, as a signal refused is.
        if not warn_full:
            raise
        rt.workflow_log.warning(
            "ask_refused", workflow_id=workflow_id, workflow_type=sysm._type_of(workflow_id), ask=name,
            ask_id=ask_id, reason=f"inbox full ({e.limit} buffered)")
        raise
    if row is None and rt.metrics is not None:  # a new ask (one found by its ask_id was counted)
        rt.metrics.count("asks")
    if row is not None and row.name != name:
        raise ValueError(
            f"ask_id {ask_id!r} of workflow {workflow_id!r} was used for an ask {row.name!r}, "
            f"not {name!r}; an ask_id names one ask"
        )
    return ask_id, row


def carry_out_external_ask(sysm: ActorSystem, workflow_id: str, name: str, request: Any) -> None:
    """An ask the ``wf`` CLI left (``{"ask_id", "payload"}``, JSON): stored as ``ask`` stores
    one; its reply is read back from the asks table by the CLI."""
    if not isinstance(request, dict) or not isinstance(request.get("ask_id"), str):
        raise ValueError(
            f"an external ask needs {{'ask_id': str, 'payload': ...}}, got {request!r}"
        )
    start_ask(sysm, workflow_id, name, request.get("payload"), request["ask_id"], warn_full=False)


def _wake(rt: Runtime, p: Promise[tuple[AskRow | None, Delivered | None]]) -> None:
    if p.exception() is None:
        delivered = p.result()[1]
        if delivered is not None:
            rt.wake([delivered])


def ask_outcome(row: AskRow) -> Any:
    """The reply of an answered ask, or the error it raises."""
    if row.status == ASK_OK:
        return loads(row.reply) if row.reply is not None else None
    info = json.loads(row.error or "{}")
    if row.status == ASK_ENDED:
        raise WorkflowNotRunning(
            row.workflow_id, str(info.get("status")), f"answer ask {row.name!r} (id {row.ask_id!r})"
        )
    error: BaseException | None = None
    if row.reply is not None:
        with contextlib.suppress(Exception):
            loaded = loads(row.reply)
            error = loaded if isinstance(loaded, BaseException) else None
    raise AskFailed(
        row.workflow_id, row.name, row.ask_id, info.get("type"), info.get("message"), error
    ) from error


def check_ask(sysm: ActorSystem, workflow_id: str, ask_id: str, name: str) -> AskRow | None:
    """The ask's row if answered; None while pending. A pending ask of a workflow that ended
    (asked as it ended, on a cluster) fails; one whose workflow is gone was pruned."""
    store = sysm._rt.store
    row = store.ask(workflow_id, ask_id)
    if row is not None and row.answered:
        return row
    running = store.running(workflow_id)
    if running is None:
        raise sysm._unknown(workflow_id)
    if not running:
        row = store.ask(workflow_id, ask_id)  # answered by its last step, read again after it
        if row is not None and row.answered:
            return row
        rec = store.load_workflow(workflow_id)
        raise WorkflowNotRunning(
            workflow_id, rec.status if rec else "pruned", f"answer ask {name!r} (id {ask_id!r})"
        )
    return None


def blocked_note(sysm: ActorSystem, workflow_id: str) -> str:
    """What a timeout adds when the workflow is held as blocked (its code missing or changed):
    why, as ``result()``'s timeout says it; "" otherwise. One read, made at the timeout only."""
    try:  # (a storage that does not answer holds the caller no longer than a short read)
        rec = read_within(sysm, 0.0, "", lambda: sysm._rt.store.load_workflow(workflow_id))
    except Exception:  # the timeout is said all the same
        return ""
    text = waiting_text(rec.waiting_on) if rec is not None and rec.status == "running" else None
    if not text or not text.startswith("BLOCKED ("):
        return ""
    return f"; workflow {workflow_id!r} is held as {text}"


def _timed_out(
    workflow_id: str, name: str, ask_id: str, timeout: float | None, note: str = ""
) -> TimeoutError:
    return TimeoutError(
        f"ask {name!r} (id {ask_id!r}) to workflow {workflow_id!r} got no reply within {timeout}s; "
        f"the request stays stored: ask again with ask_id={ask_id!r} to go on waiting for its reply"
        f"{note}"
    )


def _closed_while_asking(sysm: ActorSystem, workflow_id: str, name: str, ask_id: str) -> SystemClosed:
    """The SystemClosed of an ask whose wait a shutdown ended: its request is stored, so it
    names the ask_id that gets its reply from the next system (a generated one is known only
    here)."""
    e = SystemClosed(
        f"the ActorSystem on {sysm._shown_db!r} was shut down while ask {name!r} (id {ask_id!r}) to "
        f"workflow {workflow_id!r} waited for its reply; the request stays stored: ask again "
        f"with ask_id={ask_id!r} (on the next system) to get its reply, asked once"
    )
    e.ask_id = ask_id
    return e


def ask(
    sysm: ActorSystem,
    workflow_id: str,
    name: str,
    payload: Any,
    timeout: float | None,
    ask_id: str | None,
) -> Any:
    check_timeout(timeout, "ask", nothing_sent=True)
    deadline = None if timeout is None else time.monotonic() + timeout
    waiting = _Waiting(sysm._rt, workflow_id)  # before the write: a reply right after it wakes us
    stored: str | None = None  # the ask's id once its request is stored
    try:
        ask_id, row = start_ask(sysm, workflow_id, name, payload, ask_id, timeout)
        stored = ask_id
        recheck = RECHECK
        while row is None or not row.answered:
            # Waited for first: the reply's commit wakes us (registered before the ask was
            # written, so a reply that came already has), then one read finds it.
            remaining = None if deadline is None else deadline - time.monotonic()
            with contextlib.suppress(TimeoutError):
                waiting.woken.result(
                    recheck if remaining is None else max(0.0, min(remaining, recheck))
                )
            recheck = min(recheck * 2, RECHECK_MAX) if not waiting.woken.done() else RECHECK
            waiting.renew()
            sysm._check_open()  # shut down while it waited: SystemClosed, as for result()
            row = check_ask(sysm, workflow_id, ask_id, name)
            if row is None and remaining is not None and remaining <= 0:
                raise _timed_out(workflow_id, name, ask_id, timeout, blocked_note(sysm, workflow_id))
        return ask_outcome(row)
    except StoreClosed:
        if stored is not None and sysm._closed:
            raise _closed_while_asking(sysm, workflow_id, name, stored) from None
        sysm._check_open()  # the system shut down between the check and a read: SystemClosed
        raise
    except SystemClosed as e:
        if stored is not None and e.ask_id is None:
            raise _closed_while_asking(sysm, workflow_id, name, stored) from None
        raise
    finally:
        waiting.close()


async def ask_async(
    sysm: ActorSystem,
    workflow_id: str,
    name: str,
    payload: Any,
    timeout: float | None,
    ask_id: str | None,
) -> Any:
    sysm._check_open()
    check_timeout(timeout, "ask_async", nothing_sent=True)
    loop = asyncio.get_running_loop()
    deadline = None if timeout is None else loop.time() + timeout
    rt = sysm._rt
    waiting = _Waiting(rt, workflow_id)
    stored: str | None = None  # the ask's id once its request is stored
    try:
        ask_id, row = await sysm._aio.run(
            sysm._closed_error, start_ask, sysm, workflow_id, name, payload, ask_id, timeout
        )
        assert ask_id is not None
        stored = ask_id
        recheck = RECHECK
        while row is None or not row.answered:
            woken, wake = sysm._aio.waiter()
            waiting.woken.add_done_callback(wake)
            try:
                # Waited for first, as in ``ask``: then one read finds the reply.
                remaining = None if deadline is None else deadline - loop.time()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(
                        woken, recheck if remaining is None else max(0.0, min(remaining, recheck))
                    )
                recheck = min(recheck * 2, RECHECK_MAX) if not waiting.woken.done() else RECHECK
            finally:
                woken.cancel()
            waiting.renew()
            row = await sysm._aio.run(
                sysm._closed_error, check_ask, sysm, workflow_id, ask_id, name
            )
            if row is None and remaining is not None and remaining <= 0:
                note = await sysm._aio.run(sysm._closed_error, blocked_note, sysm, workflow_id)
                raise _timed_out(workflow_id, name, ask_id, timeout, note)
        return ask_outcome(row)
    except (SystemClosed, StoreClosed) as e:
        if stored is not None and sysm._closed and getattr(e, "ask_id", None) is None:
            raise _closed_while_asking(sysm, workflow_id, name, stored) from None
        raise
    finally:
        waiting.close()


# -- published ---------------------------------------------------------------------------------
def read_published(sysm: ActorSystem, workflow_id: str, key: str) -> tuple[Any, bool | None]:
    """``(value or _MISSING, running)``: what ``workflow_id`` published under ``key``."""
    sysm._check_open()
    store = sysm._rt.store
    blob = store.published(workflow_id, key)
    if blob is not None:
        return loads(blob), True
    running = store.running(workflow_id)
    if running is None:
        raise sysm._unknown(workflow_id)
    if not running:
        blob = store.published(workflow_id, key)  # published by its last step, read after it
        if blob is not None:
            return loads(blob), False
    return _MISSING, running


def _not_published(
    workflow_id: str, key: str, running: bool | None, timeout: float | None, note: str = ""
) -> BaseException:
    if not running:
        return KeyError(f"workflow {workflow_id!r} ended without publishing {key!r}")
    if timeout is None:
        return KeyError(
            f"workflow {workflow_id!r} has published nothing under {key!r} yet; pass timeout= "
            f"to wait for a first value"
        )
    return NothingPublished(
        f"workflow {workflow_id!r} published nothing under {key!r} within {timeout}s{note}"
    )


def published(sysm: ActorSystem, workflow_id: str, key: str, timeout: float | None) -> Any:
    check_name(key, "published() key")
    check_timeout(timeout, "published")
    what = f"published({key!r}) of workflow {workflow_id!r}"
    deadline = None if timeout is None else time.monotonic() + timeout
    value, running = read_within(sysm, timeout, what, lambda: read_published(sysm, workflow_id, key))
    if value is not _MISSING:
        return value
    if deadline is None or not running:
        raise _not_published(workflow_id, key, running, timeout)
    waiting = _Waiting(sysm._rt, workflow_id)
    try:
        recheck = RECHECK
        while True:
            value, running = read_within(sysm, deadline - time.monotonic(), what,
                                         lambda: read_published(sysm, workflow_id, key))
            if value is not _MISSING:
                return value
            remaining = deadline - time.monotonic()
            if not running:
                raise _not_published(workflow_id, key, running, timeout)
            if remaining <= 0:
                raise _not_published(workflow_id, key, running, timeout, blocked_note(sysm, workflow_id))
            with contextlib.suppress(TimeoutError):
                waiting.woken.result(min(remaining, recheck))
            recheck = min(recheck * 2, RECHECK_MAX) if not waiting.woken.done() else RECHECK
            waiting.renew()
    finally:
        waiting.close()


async def published_async(
    sysm: ActorSystem, workflow_id: str, key: str, timeout: float | None
) -> Any:
    check_name(key, "published() key")
    check_timeout(timeout, "published_async")
    sysm._check_open()
    loop = asyncio.get_running_loop()
    late = read_late(sysm, f"published_async({key!r}) of workflow {workflow_id!r}")
    value, running = await sysm._aio.run_within(sysm._closed_error, read_wait(sysm, timeout), late,
                                                read_published, sysm, workflow_id, key)
    if value is not _MISSING:
        return value
    if timeout is None or not running:
        raise _not_published(workflow_id, key, running, timeout)
    deadline = loop.time() + timeout
    waiting = _Waiting(sysm._rt, workflow_id)
    try:
        recheck = RECHECK
        while True:
            woken, wake = sysm._aio.waiter()
            waiting.woken.add_done_callback(wake)
            try:
                value, running = await sysm._aio.run_within(
                    sysm._closed_error, read_wait(sysm, deadline - loop.time()), late,
                    read_published, sysm, workflow_id, key,
                )
                if value is not _MISSING:
                    return value
                remaining = deadline - loop.time()
                if not running:
                    raise _not_published(workflow_id, key, running, timeout)
                if remaining <= 0:
                    note = await sysm._aio.run(sysm._closed_error, blocked_note, sysm, workflow_id)
                    raise _not_published(workflow_id, key, running, timeout, note)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken, min(remaining, recheck))
                recheck = min(recheck * 2, RECHECK_MAX) if not waiting.woken.done() else RECHECK
            finally:
                woken.cancel()
            waiting.renew()
    finally:
        waiting.close()


def published_values(sysm: ActorSystem, workflow_ids: list[str]) -> dict[str, dict[str, Any]]:
    """Every published value of each workflow, loaded (one that cannot be: what went wrong)."""
    out: dict[str, dict[str, Any]] = {}
    for wid, values in sysm._rt.store.published_of(workflow_ids).items():
        loaded: dict[str, Any] = {}
        for key, blob in values.items():
            try:
                loaded[key] = loads(blob)
            except Exception as e:  # a value whose class is gone here
                loaded[key] = f"<value cannot be loaded: {e}>"
        out[wid] = loaded
    return out
