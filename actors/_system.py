"""``ActorSystem``: the embedded runtime on one SQLite file, or as one node of a cluster on PostgreSQL."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Literal, ParamSpec, TypeVar, overload

from actors._log import SystemLog
from persistence import (
    CANCEL,
    RUNNING,
    SIGNAL,
    Delivered,
    Dropped,
    InboxFull,
    NewWorkflow,
    Promise,
    StorageUnavailable,
    UnknownWorkflowId,
    WorkflowFinished,
    dumps,
    open_store,
)
from persistence._promise import handing_off
from persistence._serialization import check_loads
from persistence._urls import display_url
from persistence._writer import on_engine_thread
from workflows import Status, WorkflowFunction
from workflows._compiler import checkpoint, restore
from workflows._errors import CheckpointError, WorkflowError, check_id, check_text

from . import _history, _serve, _talk, _tombstones
from ._actor import (
    DirectSignal,
    FireTimer,
    Kick,
    filter_key,
)
from ._aio import AsyncBridge
from ._clock import AnchoredClock, Clock
from ._errors import SystemClosed, UnknownWorkflow, WorkflowNotRunning, check_timeout
from ._info import NodeInfo, WorkflowInfo, info_from_record, types_named
from ._metrics import Metrics, registry_for
from ._recovery import recover
from ._refs import _REF_TOKEN, WorkflowRef
from ._requests import Requests
from ._retention import Retention, check_seconds
from ._runtime import Runtime
from ._schedules import Catchup, Overlap, ScheduleInfo, Schedules
from ._writes import new_workflow_record

R = TypeVar("R")
A1 = TypeVar("A1")
A2 = TypeVar("A2")
A3 = TypeVar("A3")
A4 = TypeVar("A4")
A5 = TypeVar("A5")
A6 = TypeVar("A6")
P = ParamSpec("P")


_IDLE_POLL = 0.005  # seconds between the checks of idle_async


def _id_bits() -> str:
    """48 random bits as twelve hex digits (what the first twelve of a uuid4's are, without
    building a UUID object per start)."""
    return os.urandom(6).hex()


def _new_id(wf: Any) -> str:
    return f"{wf.__name__}-{_id_bits()}"


def _check_flags(what: str, **flags: object) -> None:
    """Each of ``flags`` is a bool, or a TypeError naming it (``test_mode="yes"`` was taken)."""
    for name, value in flags.items():
        if not isinstance(value, bool):
            raise TypeError(f"{what}() {name} must be True or False, got {value!r}")


def _seed(wf: Any, key: str, wid: str, args: tuple[Any, ...], test_mode: bool, now: float) -> tuple[NewWorkflow, Any, bytes]:
    """A new top-level workflow's record, with the continuation and checkpoint it was made from."""
    cont = wf.start(*args)
    try:
        blob = checkpoint(cont)
    except CheckpointError as e:
        # Nothing of the workflow has run: what cannot be pickled is an argument of the start.
        raise CheckpointError(
            f"cannot start workflow {key}: its argument {e.variable!r} ({e.value_type}) cannot be "
            f"pickled, and a workflow's arguments are part of its durable state. Pass plain "
            f"picklable data (an id, a dataclass of values), and open files, locks or "
            f"connections inside a procedure.",
            variable=e.variable, value_type=e.value_type, location=None,
        ) from e
    # The workflow starts from its checkpoint, as it would after a restart: its arguments are a
    # copy, not the caller's objects (a dict the caller changes after start() returned changed
    # the running workflow's too, until it was loaded again).
    cont = restore(blob)
    return new_workflow_record(wid, key, blob, cont.fingerprint, created_at=now, test_mode=test_mode), cont, blob


class ActorSystem:
    """An embedded workflow runtime on one SQLite file, or one node of a cluster on a
    ``postgresql://`` URL.

    Opening it recovers every unfinished workflow in the file: timers that fell due while the
    process was down fire at once, pending procedures run again with the same idempotency key,
    buffered signals are delivered.
    """


    def __init__(
        self,
        db: str | os.PathLike[str] = "workflows.db",
        *,
        clock: Clock | None = None,
        procedure_workers: int = 8,
        passivate_after: float = 60.0,
        max_live: int = 1_000,
        durability: Literal["normal", "full"] = "normal",
        inbox_limit: int = 10_000,
        retention: float | timedelta | None = 7 * 86400,
        node_id: str | None = None,
        node_ttl: float = 10.0,
        history_limit: int | None = None,
        id_retention: float | timedelta | None = 30 * 86400,
        metrics: Any = None,
        _local_time: Callable[[], float] | None = None,
    ) -> None:
        if not isinstance(db, str | os.PathLike):
            raise TypeError(f"db must be a SQLite path or a postgresql:// URL, got {db!r}")
        db = self.db = os.fspath(db)
        if clock is not None and not isinstance(clock, Clock):
            raise TypeError(
                f"clock must be a clock object such as actors.testing.VirtualClock() (or None: real "
                f"time), got {clock!r}")
        # Checked before anything opens: a missing prometheus_client says what to install.
        registry = registry_for(metrics)
        # The newest steps of each workflow its history keeps (None: every step, SPEC §10).
        self.history_limit = _history.check_limit(history_limit)
        # Seconds a pruned workflow's id stays taken (its tombstone); None: for good.
        self.id_retention = check_seconds(id_retention, "id_retention", allow_none=True)
        if node_id is not None and not isinstance(node_id, str):
            raise TypeError(f"node_id must be a string (this process's name in the cluster), got {node_id!r}")
        if node_id is not None and (not node_id.strip() or len(node_id) > 200):
            raise ValueError(
                f"node_id must be a non-blank string of at most 200 characters, got {node_id!r}; "
                f"leave it out for the default (host name and process id)")
        # This process's name in a cluster (SPEC §9): host name and process id unless given.
        self.node_id = node_id if node_id is not None else f"{socket.gethostname()}-{os.getpid()}"
        check_text(self.node_id, "node_id")
        ttl = check_seconds(node_ttl, "node_ttl", allow_none=False, positive=True)
        assert ttl is not None
        passivate_after = check_seconds(passivate_after, "passivate_after", allow_none=False)  # type: ignore[assignment]
        for what, n in (("max_live", max_live), ("procedure_workers", procedure_workers)):
            if isinstance(n, bool) or not isinstance(n, int):
                raise TypeError(f"{what} must be an int >= 1, got {n!r}")
            if n < 1:
                raise ValueError(f"{what} must be an int >= 1, got {n!r}")
        self._closed = False
        # Seconds a finished workflow is kept (then deleted, see ``_retention``); None: forever.
        self.retention = check_seconds(retention, "retention", allow_none=True)
        self._aio = AsyncBridge()
        self._stop = threading.Event()
        # What every event of this system says of it, bound once and handed to each part it
        # makes: the database it runs on, and on PostgreSQL (a cluster) its node's name and the
        # shards the node holds, whatever thread logs the event.
        is_url = isinstance(db, str) and db.startswith(("postgresql://", "postgres://"))
        # The database as messages and logs name it: a URL without its password.
        self._shown_db = display_url(db) if is_url else db
        system_log = SystemLog(self._shown_db, self.node_id if is_url else None)
        self._log = system_log.part("system")
        store = open_store(db, durability=durability, owner=True, inbox_limit=inbox_limit,
                           node_id=self.node_id, node_ttl=ttl, local_time=_local_time, _log=system_log)
        store.keep_history(self.history_limit)
        cluster = store.cluster()  # on SQLite, a cluster of one
        system_log.shards = lambda: len(cluster.owned_shards())
        if clock is None:
            # A cluster's timers fire by the database's clock, so that a node whose own clock is
            # off never fires one early (or late) by the others' reckoning (a cluster of one: its
            # own clock, never going back).
            clock = AnchoredClock(cluster.clock_offset, _local_time)
        self.clock = clock
        rt: Runtime | None = None
        try:
            self._rt = rt = Runtime(store, self.clock, procedure_workers, max_live, passivate_after, system_log)
            if registry is not None:
                rt.metrics = rt.procedures.metrics = rt.procedures.limits.metrics = Metrics(registry, rt, self._shown_db)
            self._retention = Retention(store, self.clock, self.retention, rt.forget_pruned, log=self._log,
                                        pruning=rt.pruning, id_retention=self.id_retention)
            self._schedules = Schedules(rt, self.clock, lambda wf, key, wid, args, now: _seed(wf, key, wid, args, False, now))
            # Requests the `wf` CLI left while no system owned the file, before recovery runs
            # anything: a cancel among them lands before the procedures it disarms run again.
            self._requests = Requests(self, rt)
            self._requests.take()
            self.recovered = recover(rt, self._log, self._shown_db)
            # Heartbeats, takeovers and wake-ups from now on, told on the cluster's thread.
            cluster.start(rt)
            self._house = threading.Thread(target=self._housekeeping, name="actorflow-house", daemon=True)
            self._house.start()
        except BaseException:
            # Nothing of a system that failed to open may outlive it: its threads stop, and the
            # file is released for the next ActorSystem of this process.
            self._closed = True
            if rt is not None:
                if rt.metrics is not None:
                    rt.metrics.close()
                for stop in (rt.timers.stop, rt.procedures.shutdown, rt.activator.close, rt.dispatcher.shutdown):
                    try:
                        stop()
                    except Exception as e:
                        self._log.warning("system_open_cleanup_failed", db=db, error=repr(e))
            store.close()
            raise

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> ActorSystem:
        if self._closed:  # entered again after its shutdown: say so here, not at the first call
            raise self._closed_error()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.shutdown()

    async def __aenter__(self) -> ActorSystem:
        if self._closed:
            raise self._closed_error()
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.shutdown_async()

    def shutdown(self) -> None:
        """Stop every actor and service and release the database. Nothing durable is lost. A
        cluster's node hands its shards off to the other nodes first."""
        self._stop_system(handoff=True)

    async def shutdown_async(self) -> None:
        """``shutdown`` for asyncio code (and ``async with ActorSystem(...)``): the same clean
        stop (the procedures under way finish first), on a thread of its own, awaited without
        blocking the event loop. Calls made meanwhile raise ``SystemClosed``; cancelling the
        awaiting task does not stop the shutdown, only the wait for it."""
        if self._closed:
            return
        await self._aio.run_alone(self.shutdown, "actorflow-shutdown")

    def serve(self) -> None:
        """Block until SIGTERM or SIGINT, then shut down cleanly (a cluster's node hands its
        shards off first, and shows as ``left``); returns at once if the system is shut down
        otherwise meanwhile. Call it from the main thread, which receives the signals."""
        self._check_open()
        _serve.serve(lambda: self._closed, self.shutdown, self._shown_db, self._log)

    async def serve_async(self) -> None:
        """``serve`` for asyncio code (an asyncio server's main): awaits SIGTERM or SIGINT on
        the running loop, which goes on serving meanwhile, then shuts down cleanly as
        ``shutdown_async`` does; returns at once if the system is shut down otherwise meanwhile.
        Run it on a loop in the main thread, which receives the signals."""
        self._check_open()
        await _serve.serve_async(lambda: self._closed, self.shutdown_async, self._shown_db, self._log)

    def _crash(self) -> None:
        """Stop without handing anything off, as a crash would as far as the database can tell
        (the test cluster's ``crash``): the other nodes find this one dead and take over."""
        self._stop_system(handoff=False)

    def _stop_system(self, *, handoff: bool) -> None:
        if self._closed:
            return
        self._closed = True
        self._aio.close()  # wakes every result_async, lets the async calls under way finish
        self._stop.set()
        self._house.join(timeout=5)
        rt = self._rt
        rt.timers.stop()
        crash = getattr(rt.store, "crash", None)
        # A crash leaves the attempts counted for calls that never started as they are, as a
        # real one would.
        rt.procedures.shutdown(give_back=handoff or crash is None)
        rt.activator.close()
        rt.dispatcher.shutdown()
        if handoff or crash is None:
            rt.store.close()  # a cluster's node hands its shards off once its writes are in
        else:
            crash()
        if rt.metrics is not None:
            rt.metrics.close()
        self._log.info("system_shutdown", db=self._shown_db)

    def _check_open(self) -> None:
        if self._closed:
            raise self._closed_error()
        if on_engine_thread():
            # Workflow code and reducers run on the engine's thread: a call that waits for a
            # commit or a step would wait for that very thread (the whole system with it).
            raise WorkflowError(
                "the ActorSystem (and a WorkflowRef) cannot be called from workflow code or a "
                "reducer, which run on the engine's thread the call would wait for: in a workflow, "
                "use send(), broadcast(), spawn() or a procedure (procedures may call the system)"
            )

    def _closed_error(self) -> SystemClosed:
        if self.db == ":memory:":  # nothing to open again: its workflows ended with it
            return SystemClosed("the ActorSystem on ':memory:' was shut down, and its in-memory database with it")
        return SystemClosed(
            f"the ActorSystem on {self._shown_db!r} was shut down; open a new ActorSystem({self._shown_db!r}) "
            f"to go on (it recovers every unfinished workflow)")

    def _housekeeping(self) -> None:
        last_passivate = time.monotonic()
        pause = 0.05
        outage: float | None = None  # since when its rounds fail on storage that may pass
        while not self._stop.wait(pause):
            pause = 0.05
            try:
                # Retention: one short batch per round, the next soon after while more is due.
                if self._leads() and self._retention.tick():
                    pause = self._retention.pace()
                self._schedules.tick(self._leads())
                if self._rt.activator.has_waiting():
                    self._rt.activator.passivate_idle(0.0)
                if time.monotonic() - last_passivate >= min(1.0, self._rt.passivate_after):
                    last_passivate = time.monotonic()
                    self._rt.activator.passivate_idle(self._rt.passivate_after)
                # A request waiting for room is tried again after a commit (only a step that
                # consumes signals, or ends the workflow, makes room): changed() sees those too.
                # One kept after a storage fault is tried again after its backoff.
                retry = self._requests.retry_at
                if self._rt.store.changed() or (retry is not None and time.monotonic() >= retry):
                    self._requests.take()
                if outage is not None:
                    self._log.info("housekeeping_resumed", seconds=round(time.monotonic() - outage, 3))
                    outage = None
            except Exception as e:
                if self._stop.is_set():
                    # Shut down while this round waited on the storage (a server away holds a
                    # read for seconds): the store closed under it. Nothing failed.
                    return
                if not isinstance(e, StorageUnavailable):
                    self._log.error("housekeeping_failed", error=repr(e))
                    self._requests.retry_at = time.monotonic() + 1.0
                    continue
                # An outage (a server away, a full disk): the next round tries again, and an
                # outage that heals is no failure for good. Said once per outage.
                self._schedules.away()  # ticks due from now on may be missed (``catchup``)
                if outage is None:
                    outage = time.monotonic()
                    self._log.warning("housekeeping_failed", error=str(e), retrying="every round, until storage recovers")
                pause = 0.25
                self._requests.retry_at = time.monotonic()  # a request it missed: the next round

    def _leads(self) -> bool:
        """True on the node that runs what the whole database needs once (retention and `wf
        prune` requests): the holder of shard 0 on a cluster, the system itself otherwise."""
        return 0 in self._rt.cluster.owned_shards()

    def _fire_timer(self, workflow_id: str, name: str, timeout: float | None, external_seq: int | None = None) -> None:
        self._check_open()
        if isinstance(name, str):
            check_text(name, "timer name")
        rec = self._rt.store.load_workflow(workflow_id)
        if rec is None:
            raise self._unknown(workflow_id)
        if rec.status != RUNNING:
            raise WorkflowNotRunning(workflow_id, rec.status, f"fire timer {name!r}")
        if not self._rt.owns(workflow_id):
            if external_seq is None:  # (a request for another node's workflow is not taken here)
                self._fire_timer_elsewhere(workflow_id, name, timeout)
            return
        msg = FireTimer(name, external_seq=external_seq)
        self._rt.activator.deliver(workflow_id, msg)
        try:
            msg.reply.result(timeout)
        except TimeoutError:
            raise TimeoutError(
                f"workflow {workflow_id!r} did not take the firing of its timer {name!r} within "
                f"{timeout}s; the firing was handed to it: an armed timer of that name fires when "
                f"the workflow gets to it"
            ) from None

    def _fire_timer_elsewhere(self, workflow_id: str, name: str, timeout: float | None) -> None:
        """``debug_fire_timer`` of a workflow another node runs: a request for it, as `wf
        fire-timer` posts, carried out by that node; returns once it is."""
        seq = self._rt.store.post_external("fire_timer", workflow_id, name, None, at=self.clock.now())
        deadline = time.monotonic() + (timeout if timeout is not None else float("inf"))
        while any(r.seq == seq for r in self._rt.store.take_external(0)):
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"the node that runs workflow {workflow_id!r} did not fire its timer {name!r} "
                    f"within {timeout}s (the request stays; it fires it when it gets to it)")
            time.sleep(0.02)

    # -- API -----------------------------------------------------------------------------------
    # The overloads check the workflow's arguments for a type checker, with one overload per
    # arity up to six. (A ParamSpec cannot be used, because ``id=`` and ``test_mode=`` follow
    # ``*args``; a TypeVarTuple could, but then mypy words its errors worse.) More arguments go
    # through a ParamSpec, without the options.
    @overload
    def start(
        self, wf: WorkflowFunction[[], R], /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1], R], a1: A1, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2], R], a1: A1, a2: A2, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2, A3], R], a1: A1, a2: A2, a3: A3, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2, A3, A4], R], a1: A1, a2: A2, a3: A3, a4: A4, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2, A3, A4, A5], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(
        self, wf: WorkflowFunction[[A1, A2, A3, A4, A5, A6], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    def start(self, wf: WorkflowFunction[P, R], /, *args: P.args, **kwargs: P.kwargs) -> WorkflowRef[R]: ...

    def start(  # type: ignore[misc]  # ``wf`` may also be named in ``**kwargs``
        self, wf: Any, *args: Any, id: str | None = None, test_mode: bool = False,
        reuse_id: bool = False,
    ) -> WorkflowRef[Any]:
        """Start ``wf(*args)`` durably and return its ref; an existing ``id`` starts nothing new.

        The id of a finished workflow that was pruned stays taken for ``id_retention`` seconds:
        starting it raises ``WorkflowPruned`` (naming when it ended), unless ``reuse_id=True``.
        """
        self._check_open()
        key = getattr(wf, "__workflow_key__", None)
        if key is None:
            raise TypeError(f"system.start() needs a @workflow function, got {wf!r}")
        _check_flags("start", test_mode=test_mode, reuse_id=reuse_id)
        if id is not None and (not isinstance(id, str) or not id):
            raise TypeError(f"workflow id must be a non-empty string, got {id!r}")
        if id is not None:
            check_id(id, "workflow id")
        if id is not None and (rec := self._rt.store.load_workflow(id)) is not None:
            return self._existing(rec.id, rec.type, rec.status, key)
        if id is not None and not reuse_id:
            _tombstones.refuse_pruned(self._rt.store, id, self.clock.now(), self.id_retention)
        if id is not None and not self._rt.cluster.owns(id):
            # Its shard is another node's: the record goes in here, its first step runs there.
            self._create([_seed(wf, key, id, args, test_mode, self.clock.now())])
            return WorkflowRef(self, id, _token=_REF_TOKEN)
        while True:
            wid = id or self._local_id(wf)
            seed = _seed(wf, key, wid, args, test_mode, self.clock.now())
            if id is None and not self._rt.cluster.owns_new(wid):
                # No shard leased here (a node that has just joined, before its first rounds):
                # as for an id of another node's shard, the record goes in here and its first
                # step runs on the shard's owner (run here, the fence would refuse it).
                if self._create([seed])[0]:
                    return WorkflowRef(self, wid, _token=_REF_TOKEN)
                continue  # a generated id already taken: draw another
            # Its first step runs in its actor and commits the record with it (one transaction);
            # this thread only waits for that.
            created: Promise[bool] = Promise()
            with handing_off():
                self._rt.activator.deliver(wid, Kick(seed, created))
                taken = self._rt.written(created, f"start of workflow {wid!r}")
            if taken:
                self._rt.outcomes.started(wid)
                return WorkflowRef(self, wid, _token=_REF_TOKEN)
            if id is not None:  # created meanwhile, by another thread or node
                rec = self._rt.store.load_workflow(id)
                if rec is not None:
                    return self._existing(id, rec.type, rec.status, key)
                return WorkflowRef(self, id, _token=_REF_TOKEN)
            # A generated id already taken (48 random bits: rare, not impossible in a file that
            # keeps millions of workflows): that workflow is someone else's, so draw another.

    def _existing(self, id: str, stored: str, status: str, key: str) -> WorkflowRef[Any]:
        """The ref ``start`` returns for an id that exists: that workflow, if it is of the type
        started (a start by id is idempotent); a ValueError if another type's workflow holds it."""
        if stored != key:
            raise ValueError(
                f"cannot start {key} with id {id!r}: the id is taken by a workflow of another type, "
                f"{stored} ({status}); a start of an existing id returns that workflow only when it "
                f"is of the same type: choose another id (system.get({id!r}) gives the one there)")
        return WorkflowRef(self, id, _token=_REF_TOKEN)

    @overload
    async def start_async(
        self, wf: WorkflowFunction[[], R], /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1], R], a1: A1, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2], R], a1: A1, a2: A2, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2, A3], R], a1: A1, a2: A2, a3: A3, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2, A3, A4], R], a1: A1, a2: A2, a3: A3, a4: A4, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2, A3, A4, A5], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[[A1, A2, A3, A4, A5, A6], R], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, /, *,
        id: str | None = None, test_mode: bool = False, reuse_id: bool = False,
    ) -> WorkflowRef[R]: ...
    @overload
    async def start_async(
        self, wf: WorkflowFunction[P, R], /, *args: P.args, **kwargs: P.kwargs
    ) -> WorkflowRef[R]: ...

    async def start_async(  # type: ignore[misc]  # ``wf`` may also be named in ``**kwargs``
        self, wf: Any, *args: Any, id: str | None = None, test_mode: bool = False,
        reuse_id: bool = False,
    ) -> WorkflowRef[Any]:
        """``start`` for asyncio code: the ref, once the start is durable, without blocking the loop.

        A start runs the workflow's first step and waits for its commit, so it runs on the
        system's own executor (at most ``ASYNC_WORKERS`` threads), never on the loop's. Cancelling
        the awaiting task does not undo a start already under way. Typed as ``start``.
        """
        ref: WorkflowRef[Any] = await self._aio.run(
            self._closed_error, lambda: self.start(wf, *args, id=id, test_mode=test_mode, reuse_id=reuse_id)
        )
        return ref

    async def start_many_async(
        self,
        wf: WorkflowFunction[..., R],
        args: list[tuple[Any, ...]],
        *,
        ids: list[str] | None = None,
        test_mode: bool = False,
        reuse_id: bool = False,
    ) -> list[WorkflowRef[R]]:
        """``start_many`` for asyncio code: the refs, once the starts are durable, without
        blocking the loop (the write waits for its commit on the system's executor)."""
        refs: list[WorkflowRef[R]] = await self._aio.run(
            self._closed_error,
            lambda: self.start_many(wf, args, ids=ids, test_mode=test_mode, reuse_id=reuse_id),
        )
        return refs

    def start_many(
        self,
        wf: WorkflowFunction[..., R],
        args: list[tuple[Any, ...]],
        *,
        ids: list[str] | None = None,
        test_mode: bool = False,
        reuse_id: bool = False,
    ) -> list[WorkflowRef[R]]:
        """Start ``wf(*a)`` for each tuple in ``args``, durably, in one transaction.

        Like ``start`` for each (an existing id starts nothing new), at a fraction of the cost:
        spawning a wave of monsters or a thousand auctions is one commit.
        """
        self._check_open()
        key = getattr(wf, "__workflow_key__", None)
        if key is None:
            raise TypeError(f"system.start_many() needs a @workflow function, got {wf!r}")
        _check_flags("start_many", test_mode=test_mode, reuse_id=reuse_id)
        if isinstance(args, str | bytes | dict):
            raise TypeError(f"start_many() args must be a list of argument tuples, got {args!r}")
        listed = list(args)
        for i, a in enumerate(listed):
            if not isinstance(a, tuple | list):  # one tuple per workflow: wf(*a)
                raise TypeError(
                    f"start_many() args must be a list of argument tuples, one per workflow, got "
                    f"{a!r} at index {i}; write [({a!r},), ...] for a workflow of one argument")
        args = [tuple(a) for a in listed]
        generated = ids is None
        if ids is not None and isinstance(ids, str | bytes):
            raise TypeError(f"start_many() ids must be a list of workflow ids, one per tuple of args, got {ids!r}")
        if ids is None:
            ids = [_new_id(wf) for _ in args]
        elif len(ids := list(ids)) != len(args):
            raise ValueError(f"start_many() got {len(args)} argument tuples but {len(ids)} ids")
        for wid in ids:
            if not isinstance(wid, str) or not wid:
                raise TypeError(f"workflow ids must be non-empty strings, got {wid!r}")
            check_id(wid, "workflow id")
        now = self.clock.now()
        if not generated:
            # An id held by another type's workflow, or left taken by a pruned one: refused
            # before any starts (read a hundred ids to a statement).
            held = self._rt.store.load_workflows(ids)
            for wid in ids:
                if (rec := held.get(wid)) is not None:
                    self._existing(rec.id, rec.type, rec.status, key)
            if not reuse_id:
                _tombstones.refuse_pruned_many(self._rt.store, ids, now, self.id_retention)
        seeds = [_seed(wf, key, wid, a, test_mode, now) for wid, a in zip(ids, args, strict=True)]
        created = self._create(seeds)
        while generated and not all(created):
            # Generated ids already taken (see start()): draw others for those alone.
            retry = [i for i, ok in enumerate(created) if not ok]
            for i in retry:
                ids[i] = _new_id(wf)
                seeds[i] = _seed(wf, key, ids[i], args[i], test_mode, now)
            for i, ok in zip(retry, self._create([seeds[i] for i in retry]), strict=True):
                created[i] = ok
        self._log.info("workflows_started", workflow_type=key, count=sum(created), existing=len(ids) - sum(created))
        return [WorkflowRef(self, wid, _token=_REF_TOKEN) for wid in ids]

    def _local_id(self, wf: Any) -> str:
        """A new id, of a shard this node leases if it can find one (a start then runs here)."""
        cluster = self._rt.cluster
        wid = _new_id(wf)
        for _ in range(64):
            if cluster.owns_new(wid):
                break
            wid = _new_id(wf)
        return wid

    def _create(self, seeds: list[tuple[NewWorkflow, Any, bytes]]) -> list[bool]:
        """Insert the records of ``seeds`` in one transaction, and start those created: on the
        writer's thread, after the commit, so an interruption of this wait loses none. One whose
        shard another node leases is started by that node (the commit left it a wake-up)."""
        def kick(p: Promise[list[bool]]) -> None:
            if p.exception() is not None:
                return
            remote = False
            cluster = self._rt.cluster
            for seed, ok in zip(seeds, p.result(), strict=True):
                if ok:
                    if self._rt.metrics is not None:
                        self._rt.metrics.workflow_started(seed[0].type)
                    self._rt.workflow_log.info(
                        "workflow_started",
                        workflow_id=seed[0].id,
                        workflow_type=seed[0].type,
                        test_mode=seed[0].test_mode,
                    )
            for seed, ok in zip(seeds, p.result(), strict=True):
                # (A root workflow just created: its shard is its own id's, known unread.)
                if ok and cluster.owns_new(seed[0].id):
                    self._rt.activator.deliver(seed[0].id, Kick(seed))
                elif ok:
                    remote = True
            if remote:
                cluster.publish_wake()

        written = self._rt.store.submit_create_workflows([s[0] for s in seeds])
        self._rt.after_commit(written, kick)
        ids = ", ".join(repr(s[0].id) for s in seeds[:3]) + (", ..." if len(seeds) > 3 else "")
        return self._rt.written(written, f"start of workflow(s) {ids}")

    def get(self, workflow_id: str) -> WorkflowRef[Any]:
        """A ref to an existing workflow; an unknown id raises ``UnknownWorkflow``."""
        self._check_open()
        if not isinstance(workflow_id, str):  # as start(id=...): no id of another type exists
            raise TypeError(f"workflow id must be a string, got {workflow_id!r}")
        check_text(workflow_id, "workflow id")
        if self._rt.store.load_workflow(workflow_id) is None:
            raise self._unknown(workflow_id)
        return WorkflowRef(self, workflow_id, _token=_REF_TOKEN)

    def prune(self, older_than: float | timedelta) -> int:
        """Delete now every workflow that finished ``older_than`` seconds ago or more (on the
        system's clock; a ``timedelta`` too; 0: every finished workflow), with every row it left;
        return how many.

        Deletes in short batches, each one write among the running workflows' steps, so they go
        on meanwhile. Running workflows are never touched.
        """
        self._check_open()
        seconds = check_seconds(older_than, "prune(older_than=...)", allow_none=False)
        assert seconds is not None
        n = self._retention.prune(seconds)
        self._log.info("workflows_pruned", count=n, older_than=seconds)
        return n

    def _unknown(self, workflow_id: str) -> UnknownWorkflow:
        """The error for an id the file does not hold, saying whether it may have been pruned."""
        try:
            stone = self._rt.store.tombstone(workflow_id)
            pruned: int | None = self._rt.store.pruned_total()
        except Exception:
            stone, pruned = None, None  # the file cannot say: the message allows for both
        ended = (stone.type, stone.status, stone.ended_at, stone.pruned_at) if stone is not None else None
        return UnknownWorkflow(workflow_id, self._shown_db, pruned=pruned, retention=self.retention, ended=ended)

    def broadcast(self, name: str, filter_value: Any = None, payload: Any = None) -> int:
        """Signal every workflow subscribed to ``(name, filter_value)``; returns how many."""
        self._check_open()
        if not isinstance(name, str) or not name:
            raise TypeError(f"broadcast name must be a non-empty string, got {name!r}")
        check_text(name, "broadcast name")
        key = filter_key(filter_value)

        def wake(p: Promise[tuple[list[Delivered], list[tuple[str, Dropped]]]]) -> None:
            if p.exception() is not None:
                return
            delivered, _dropped = p.result()
            if self._rt.metrics is not None:
                self._rt.metrics.signal_sent("broadcast", len(delivered))
            self._rt.wake(delivered)

        try:
            blob = dumps(payload)
        except Exception as e:  # as a signal's: a TypeError naming the call (not the store's error)
            raise TypeError(f"broadcast {name!r}: payload cannot be pickled ({e})") from e
        try:
            check_loads(blob, payload)
        except Exception as e:
            raise TypeError(f"broadcast {name!r}: payload cannot be loaded back ({e})") from e
        written = self._rt.store.submit_broadcast(name, key, blob, at=self.clock.now())
        self._rt.after_commit(written, wake)
        delivered, dropped = self._rt.written(written, f"broadcast {name!r}")
        for wid, why in dropped:
            # A subscriber that ended is expected; a full inbox is worth a warning (as for a
            # workflow's own sends, which its history records). Logged here, by the caller, so
            # that it is logged when broadcast() returns.
            level = self._log.debug if why.expected else self._log.warning
            level("broadcast_dropped", workflow_id=wid, name=name, filter=key, reason=str(why))
        return len(delivered)

    async def broadcast_async(self, name: str, filter_value: Any = None, payload: Any = None) -> int:
        """``broadcast`` for asyncio code: how many got it, once durable, without blocking the loop.

        The write waits for its commit, so it runs on the system's own executor (at most
        ``ASYNC_WORKERS`` threads), never on the loop's.
        """
        return await self._aio.run(self._closed_error, self.broadcast, name, filter_value, payload)

    def workflows(self, status: Status | str | None = None, type: Any = None) -> list[WorkflowInfo]:
        """Snapshots of the workflows in the file, optionally by status and type (the workflow
        function, its ``module:qualname``, or its name alone when one stored type has it)."""
        self._check_open()
        try:
            st = Status(status).value if status is not None else None
        except ValueError:
            choices = ", ".join(repr(x.value) for x in Status)
            raise ValueError(
                f"workflows(status={status!r}): no such status; give a Status or one of {choices} "
                f"(or None for all)") from None
        ty = getattr(type, "__workflow_key__", type)
        if ty is not None and not isinstance(ty, str):
            raise TypeError(
                f"workflows(type={type!r}): give the @workflow function, its module:qualname or "
                f"its name (or None for all)")
        if isinstance(ty, str) and ":" not in ty:
            named = types_named((t for t, _ in self._rt.store.count_workflows()), ty)
            if len(named) > 1:
                raise ValueError(
                    f"workflows(type={ty!r}) is ambiguous: {', '.join(named)}; pass the workflow "
                    f"function or its full module:qualname"
                )
            ty = named[0] if named else ty
        recs = self._rt.store.list_workflows(status=st, type=ty)
        published = _talk.published_values(self, [r.id for r in recs])
        return self._schedules.with_ticks([info_from_record(r, published.get(r.id, {})) for r in recs])

    # The other blocking calls' twins for asyncio code: each runs its call on the system's own
    # executor (at most ``ASYNC_WORKERS`` threads), never on the loop's.
    async def get_async(self, workflow_id: str) -> WorkflowRef[Any]:
        """``get`` for asyncio code, without blocking the loop."""
        return await self._aio.run(self._closed_error, self.get, workflow_id)

    async def workflows_async(self, status: Status | str | None = None, type: Any = None) -> list[WorkflowInfo]:
        """``workflows`` for asyncio code, without blocking the loop."""
        return await self._aio.run(self._closed_error, self.workflows, status, type)

    async def prune_async(self, older_than: float | timedelta) -> int:
        """``prune`` for asyncio code, without blocking the loop."""
        return await self._aio.run(self._closed_error, self.prune, older_than)

    @overload
    async def schedule_async(
        self, id: str, wf: WorkflowFunction[[], Any], /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    async def schedule_async(
        self, id: str, wf: WorkflowFunction[[A1], Any], a1: A1, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    async def schedule_async(
        self, id: str, wf: WorkflowFunction[[A1, A2], Any], a1: A1, a2: A2, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    async def schedule_async(
        self, id: str, wf: WorkflowFunction[[A1, A2, A3], Any], a1: A1, a2: A2, a3: A3, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    async def schedule_async(
        self, id: str, wf: WorkflowFunction[[A1, A2, A3, A4], Any], a1: A1, a2: A2, a3: A3, a4: A4, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    async def schedule_async(
        self, id: str, wf: WorkflowFunction[[A1, A2, A3, A4, A5], Any], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    async def schedule_async(
        self, id: str, wf: WorkflowFunction[[A1, A2, A3, A4, A5, A6], Any], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    async def schedule_async(
        self, id: str, wf: WorkflowFunction[..., Any], a1: Any, a2: Any, a3: Any, a4: Any, a5: Any, a6: Any, a7: Any, /, *args: Any,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...

    async def schedule_async(
        self, id: str, wf: WorkflowFunction[..., Any], /, *args: Any,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo:
        """``schedule`` for asyncio code, without blocking the loop (the same options)."""
        return await self._aio.run(
            self._closed_error, self._schedule, id, wf, args, cron, every, timezone, overlap, catchup)

    async def schedules_async(self) -> list[ScheduleInfo]:
        """``schedules`` for asyncio code, without blocking the loop."""
        return await self._aio.run(self._closed_error, self.schedules)

    async def unschedule_async(self, id: str) -> bool:
        """``unschedule`` for asyncio code, without blocking the loop."""
        return await self._aio.run(self._closed_error, self.unschedule, id)

    def idle(self, timeout: float | None = None) -> None:
        """Block until nothing is left to do now: no message queued, no step or procedure running,
        no timer due. Raises ``TimeoutError`` after ``timeout`` seconds."""
        check_timeout(timeout, "idle")
        self._check_open()
        rt = self._rt
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self._idle_now():
                return
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                raise self._idle_timed_out(timeout)
            rt.work.wait(0.01 if remaining is None else min(remaining, 0.01))
            if rt.work.count == 0:
                time.sleep(0.001)  # something else is pending (a due timer): let it be picked up

    async def idle_async(self, timeout: float | None = None) -> None:
        """``idle`` for asyncio code: returns once nothing is left to do now, without blocking the loop.

        Checks every 5 ms, each check (a short read of the file) on the system's executor; between
        checks nothing waits on a thread. Raises ``TimeoutError`` after ``timeout`` seconds.
        """
        check_timeout(timeout, "idle_async")
        self._check_open()
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while True:
            if await self._aio.run(self._closed_error, self._idle_now):
                return
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                raise self._idle_timed_out(timeout)
            await asyncio.sleep(_IDLE_POLL if remaining is None else min(remaining, _IDLE_POLL))

    def _idle_now(self) -> bool:
        """Nothing is left to do now (what ``idle`` waits for)."""
        if self._closed:
            raise self._closed_error()
        rt = self._rt
        # No lock is held while checking (the timer service takes its lock, then the
        # counter's). The count is read last: every source below counts its work before it
        # lets go of it, so work handed on between the checks is still seen.
        return (
            not self._requests.pending()
            and not (self._leads() and self._retention.due())
            and not self._schedules.due(self._leads())
            and not rt.timers.has_due()
            and not rt.activator.has_waiting()
            and rt.work.count == 0
        )

    def _idle_timed_out(self, timeout: float | None) -> TimeoutError:
        rt = self._rt
        busy = rt.procedures.busy()
        running = ""
        if busy:
            shown = "; ".join(
                f"{fn} for workflow {wid!r} (key {key}, running {secs:.1f}s)" for fn, wid, key, secs in busy[:5]
            ) + (f"; and {len(busy) - 5} more" if len(busy) > 5 else "")
            running = (
                f"; procedures running now: {shown}. idle() waits for every running procedure: "
                f"one that blocks (on an event the test sets later, a lock, the network) holds it; "
                f"give the procedure a timeout= or let it return first"
            )
        return TimeoutError(
            f"system.idle() timed out after {timeout}s: {rt.work.count} messages or "
            f"procedures in flight, timers due: {rt.timers.has_due()}{running}"
        )

    # -- internals -----------------------------------------------------------------------------
    def _append(self, workflow_id: str, kind: str, name: str, payload: Any, what: str) -> None:
        self._check_open()
        if not isinstance(name, str) or not name:
            raise TypeError(f"{what} name must be a non-empty string, got {name!r}")
        check_text(name, f"{what} name")
        try:
            blob = dumps(payload)
        except Exception as e:
            raise TypeError(f"{what} {name!r} to {workflow_id!r}: payload cannot be pickled ({e})") from e
        try:
            check_loads(blob, payload)
        except Exception as e:
            raise TypeError(f"{what} {name!r} to {workflow_id!r}: payload cannot be loaded back ({e})") from e
        try:
            if kind == SIGNAL and self._rt.owns(workflow_id):
                # Handed to the workflow's actor, which makes it durable (consumed by the step it
                # resumes, or in the inbox) and answers: this thread only waits.
                msg = DirectSignal(name, blob, self.clock.now())
                with handing_off():
                    self._rt.activator.deliver(workflow_id, msg)
                    self._rt.written(msg.reply, f"{what} {name!r} to workflow {workflow_id!r}")
            else:
                written = self._rt.store.submit_append_inbox(workflow_id, kind, name, blob, at=self.clock.now())
                self._rt.after_commit(written, self._wake_after)
                self._rt.written(written, f"{what} {name!r} to workflow {workflow_id!r}")
            if kind == SIGNAL and self._rt.metrics is not None:
                self._rt.metrics.signal_sent("client")  # (once it is durable: a refused one is not sent)
        except UnknownWorkflowId:
            raise self._unknown(workflow_id) from None
        except WorkflowFinished as e:
            doing = "cancel it" if kind == CANCEL else f"{what} {name!r}"
            raise WorkflowNotRunning(workflow_id, e.status, doing) from e
        except InboxFull as e:
            # Misuse worth a warning (SPEC §8) beside the caller's error, as a broadcast dropped
            # for a full inbox is: a workflow that does not take what it is sent.
            self._rt.workflow_log.warning(
                "signal_refused", workflow_id=workflow_id, workflow_type=self._type_of(workflow_id),
                signal=name, reason=f"inbox full ({e.limit} buffered)")
            raise

    def _type_of(self, workflow_id: str) -> str | None:
        """The stored type of ``workflow_id``, for an event about it (None: it cannot be read)."""
        try:
            rec = self._rt.store.load_workflow(workflow_id)
        except Exception:  # the storage is away: the event names the id only
            return None
        return rec.type if rec is not None else None

    def _wake_after(self, written: Promise[Delivered]) -> None:
        """Once an append committed (on the writer's thread): wake its workflow."""
        if written.exception() is None:
            self._rt.wake([written.result()])

    @overload
    def schedule(
        self, id: str, wf: WorkflowFunction[[], Any], /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    def schedule(
        self, id: str, wf: WorkflowFunction[[A1], Any], a1: A1, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    def schedule(
        self, id: str, wf: WorkflowFunction[[A1, A2], Any], a1: A1, a2: A2, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    def schedule(
        self, id: str, wf: WorkflowFunction[[A1, A2, A3], Any], a1: A1, a2: A2, a3: A3, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    def schedule(
        self, id: str, wf: WorkflowFunction[[A1, A2, A3, A4], Any], a1: A1, a2: A2, a3: A3, a4: A4, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    def schedule(
        self, id: str, wf: WorkflowFunction[[A1, A2, A3, A4, A5], Any], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    def schedule(
        self, id: str, wf: WorkflowFunction[[A1, A2, A3, A4, A5, A6], Any], a1: A1, a2: A2, a3: A3, a4: A4, a5: A5, a6: A6, /, *,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...
    @overload
    def schedule(
        self, id: str, wf: WorkflowFunction[..., Any], a1: Any, a2: Any, a3: Any, a4: Any, a5: Any, a6: Any, a7: Any, /, *args: Any,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo: ...

    def schedule(
        self, id: str, wf: WorkflowFunction[..., Any], /, *args: Any,
        cron: str | None = None, every: float | timedelta | None = None, timezone: str = "UTC",
        overlap: Overlap = "skip", catchup: Catchup = "latest",
    ) -> ScheduleInfo:
        """Start ``wf(*args)`` at each tick of ``cron`` (in ``timezone``) or every ``every``
        seconds, as the workflow ``f"{id}@{tick}"`` (tick in ISO 8601 UTC); stored, so it goes on
        across restarts, and each tick starts exactly once. ``overlap="skip"`` skips a tick while
        the previous run still runs (``"allow"``: it does not); after downtime
        ``catchup="latest"`` starts the latest missed tick only (``"all"``, ``"none"``).
        Scheduling an id again updates it. An invalid expression raises ``ValueError``."""
        return self._schedule(id, wf, args, cron, every, timezone, overlap, catchup)

    def _schedule(
        self, id: str, wf: WorkflowFunction[..., Any], args: tuple[Any, ...], cron: str | None,
        every: float | timedelta | None, timezone: str, overlap: str, catchup: str,
    ) -> ScheduleInfo:
        self._check_open()
        return self._schedules.schedule(id, wf, args, cron, every, timezone, overlap, catchup)

    def schedules(self) -> list[ScheduleInfo]:
        """Every schedule of the database, with its next tick."""
        self._check_open()
        return self._schedules.schedules()

    def unschedule(self, id: str) -> bool:
        """Delete the schedule ``id`` (the workflows it started stay); False if there was none."""
        self._check_open()
        return self._schedules.unschedule(id)

    def nodes(self) -> list[NodeInfo]:
        """The live nodes of the cluster on this database (on SQLite: this process alone, which
        holds the whole file as one shard)."""
        self._check_open()
        return [NodeInfo(n.node_id, n.shards, n.heartbeat_age, n.started_at, n.state)
                for n in self._rt.cluster.nodes() if n.state in ("up", "stale")]

    async def nodes_async(self) -> list[NodeInfo]:
        """``nodes`` for asyncio code, without blocking the loop."""
        return await self._aio.run(self._closed_error, self.nodes)

    def live_actors(self) -> int:
        """How many workflow actors are live now (at most ``max_live``)."""
        return self._rt.activator.live_count()
