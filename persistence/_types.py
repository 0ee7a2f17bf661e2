"""The records the runtime and the store exchange, and the store's interface.

The store knows nothing of workflows: it keeps bytes (continuations, payloads, results) and rows.
``Store`` is the whole surface the runtime talks to, so a second backend (a shared PostgreSQL) can be
added without touching ``actors/``.
"""

from __future__ import annotations

import abc
import enum
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from persistence._promise import Promise

if TYPE_CHECKING:
    from persistence._talk import AskReply, AskRow
    from persistence._tombstones import Tombstone

# Status values stored in workflows.status.
RUNNING = "running"
COMPLETED = "completed"
FAILED = "failed"
CANCELLED = "cancelled"
FINISHED = (COMPLETED, FAILED, CANCELLED)
STATUSES = (RUNNING, *FINISHED)

# Inbox kinds.
SIGNAL = "signal"  # a signal (from start/ref.signal/send/broadcast/CLI); name = signal name
CANCEL = "cancel"  # a cancellation request; payload = pickled reason (str | None)
CHILD = "child"  # a child's outcome for its parent; name = child id; payload = pickled outcome


@dataclass(frozen=True)
class NewWorkflow:
    """A workflow to create (by ``start`` or as a child in a step)."""

    id: str
    type: str
    continuation: bytes
    fingerprint: str
    parent_id: str | None = None
    detached: bool = False
    test_mode: bool = False
    waiting_on: str | None = None  # JSON text, readable
    created_at: float = 0.0
    # A child placed by its own id's shard on a cluster (``spawn(..., placement="spread")``), not
    # its parent's; a backend with no shards ignores it.
    spread: bool = False
    # The tick of a run a schedule starts (its ``info().scheduled_at``; stored with the tick).
    scheduled_at: float | None = None


@dataclass(frozen=True)
class NewTimer:
    """A timer to arm. Its id is returned in ``StepAck.timer_ids``, in this order."""

    name: str
    due_at: float


@dataclass(frozen=True)
class NewProcedure:
    """A procedure call to dispatch. ``key`` is its stable idempotency key (unique)."""

    key: str
    function: str
    args: bytes  # pickled (args, kwargs)
    next_attempt_at: float = 0.0


@dataclass(frozen=True)
class OutSignal:
    """A message into another workflow's inbox, inserted by the step's transaction."""

    workflow_id: str
    name: str
    payload: bytes
    kind: str = SIGNAL


@dataclass(frozen=True)
class OutBroadcast:
    """A signal to every subscriber of ``(name, filter_key)``; ``filter_key`` is canonical JSON."""

    name: str
    filter_key: str
    payload: bytes


@dataclass
class StepWrite:
    """Everything one workflow step commits, atomically (one SAVEPOINT in a group transaction).

    Guards: ``step_seq`` must be the stored step counter + 1, and every ``consume_*`` row must
    exist; otherwise the step is rejected with ``StaleStep`` and nothing of it is written.

    A step whose ``status`` ends the workflow drops its continuation (``continuation`` is
    ignored) and records ``updated_at`` as its ``finished_at``, the start of its retention.
    """

    workflow_id: str
    step_seq: int
    status: str = RUNNING
    continuation: bytes | None = None
    fingerprint: str | None = None
    waiting_on: str | None = None  # JSON text, readable (what it awaits now)
    wait_signals: tuple[str, ...] = ()  # signal names awaited now (indexed, for recovery)
    result: bytes | None = None
    error: str | None = None  # JSON text {"type","message","traceback"}
    updated_at: float = 0.0
    consume_inbox: list[int] = field(default_factory=list)
    consume_timers: list[int] = field(default_factory=list)
    consume_procedures: list[str] = field(default_factory=list)
    # `wf fire-timer` requests (their seqs in the external table) this step carries out: deleted
    # with it, so a crash after the commit cannot carry one out again.
    consume_external: list[int] = field(default_factory=list)
    cancel_timers: list[int] = field(default_factory=list)  # delete if present
    cancel_procedures: list[str] = field(default_factory=list)  # delete if present
    new_timers: list[NewTimer] = field(default_factory=list)
    new_procedures: list[NewProcedure] = field(default_factory=list)
    new_workflows: list[NewWorkflow] = field(default_factory=list)
    signals: list[OutSignal] = field(default_factory=list)
    broadcasts: list[OutBroadcast] = field(default_factory=list)
    subscribe: list[tuple[str, str]] = field(default_factory=list)  # (name, filter_key)
    unsubscribe: list[tuple[str, str]] = field(default_factory=list)
    reducers: list[Callable[[Any], None]] = field(default_factory=list)  # f(db), in order
    history: list[tuple[str, str]] = field(default_factory=list)  # (event, detail JSON)
    # The workflow's newest steps as its row keeps them (``recent_steps``: JSON lines
    # ``[at, event, detail]``, this step's last); None leaves the stored ones as they are.
    recent: str | None = None
    # The workflow's own record, for the first step (step 1) of a workflow started in this
    # process: the row is inserted as that step leaves it (``WorkflowExists`` if the id is taken).
    create: NewWorkflow | None = None
    # Values published by the step, ``(key, pickled value)`` in call order, and its replies to
    # asks (``persistence._talk``): stored with it.
    published: list[tuple[str, bytes]] = field(default_factory=list)
    replies: list[AskReply] = field(default_factory=list)
    # The lines of ``recent`` this step moves out of the row (its oldest steps'): kept in the
    # history table, inserted with the step's other events. ``history_keep``: how many rows of
    # the history table the workflow keeps (None: every one, the whole history).
    # ``history_dropped``: the steps it moves out of the row and keeps nowhere (a history limit
    # below the row's steps), counted so that the positions of the entries after stay put.
    evicted: str | None = None
    history_keep: int | None = None
    history_dropped: int = 0


@dataclass(frozen=True)
class Delivered:
    """An inbox row a step (or an append) inserted, for the runtime to notify its actor."""

    workflow_id: str
    seq: int
    kind: str
    name: str
    # The row's body, so the runtime can hand the row to its actor without reading it back.
    payload: bytes | None = None
    created_at: float | None = None

    def row(self) -> InboxRow | None:
        """The inbox row as inserted, or None if this was built without its body."""
        if self.payload is None or self.created_at is None:
            return None
        return InboxRow(self.seq, self.workflow_id, self.kind, self.name, self.payload, self.created_at)


class DropCause(enum.Enum):
    """Why a message did not go into a workflow's inbox."""

    UNKNOWN = "unknown"  # no workflow has that id
    ENDED = "ended"  # it finished, failed, was cancelled or pruned: it takes no more messages
    INBOX_FULL = "inbox full"  # its bound of buffered signals is reached


@dataclass(frozen=True)
class Dropped:
    """A message that did not go into a workflow's inbox, and why.

    ``status``: the workflow's status when it ended (``finished``, ``failed``, ``cancelled``,
    ``pruned``); ``limit``: the inbox bound that was reached. ``str()`` is the reason as logged
    and kept in the sender's history.
    """

    cause: DropCause
    status: str | None = None
    limit: int | None = None

    @property
    def expected(self) -> bool:
        """A message to a workflow that has just ended is expected (a child's parent, a
        cancelled child); an unknown id or a full inbox is a mistake worth a warning."""
        return self.cause is DropCause.ENDED

    def __str__(self) -> str:
        if self.cause is DropCause.UNKNOWN:
            return "unknown workflow"
        if self.cause is DropCause.ENDED:
            return f"workflow {self.status}"
        return f"inbox full ({self.limit} buffered signals)"


@dataclass(frozen=True)
class StepAck:
    """What a committed step created."""

    timer_ids: list[int]
    delivered: list[Delivered]
    created: list[str]  # ids of workflows created (children)
    dropped: list[tuple[str, Dropped]]  # messages to unknown or ended workflows, full inboxes
    broadcast_to: int = 0  # the workflows the step's broadcasts went into (of ``delivered``)


@dataclass(frozen=True)
class WorkflowRecord:
    """A row of the workflows table."""

    id: str
    type: str
    status: str
    parent_id: str | None
    detached: bool
    test_mode: bool
    continuation: bytes | None
    fingerprint: str | None
    waiting_on: str | None
    result: bytes | None
    error: str | None
    step_seq: int
    created_at: float
    updated_at: float
    recent_steps: str | None = None  # JSON lines [at, event, detail], newest last
    finished_at: float | None = None  # when it ended (the system's clock), None while running


@dataclass(frozen=True)
class InboxRow:
    seq: int
    workflow_id: str
    kind: str
    name: str
    payload: bytes
    created_at: float


@dataclass(frozen=True)
class TimerRow:
    id: int
    workflow_id: str
    name: str
    due_at: float


@dataclass(frozen=True)
class ProcedureRow:
    key: str
    workflow_id: str
    function: str
    args: bytes
    status: str  # "pending" | "done" | "failed"
    attempts: int
    result: bytes | None
    error: str | None
    next_attempt_at: float


@dataclass(frozen=True)
class ExternalRow:
    """A request appended by another process (the ``wf`` CLI) for the owner to carry out."""

    seq: int
    kind: str  # "signal" | "cancel" | "fire_timer" | "ask" | "prune" (workflow_id "")
    workflow_id: str
    name: str | None
    payload: str | None  # JSON text
    created_at: float


@dataclass(frozen=True)
class HistoryRow:
    """A history event: from the history table (``seq`` set), or one of the steps the
    workflow's row describes (``seq`` None; the step's number is in ``detail``)."""

    seq: int | None
    workflow_id: str
    at: float
    event: str
    detail: str  # JSON text


@dataclass(frozen=True)
class NodeRow:
    """A node of a cluster as its database knows it (``system.nodes()``, ``wf nodes``).

    ``heartbeat_age`` is by the database's clock; ``started_at`` (epoch seconds) is when its
    current incarnation joined; ``state`` is ``up``, ``stale`` (up by its row, but its heartbeat
    is older than its ttl: frozen, or killed with no other node left to declare it dead),
    ``dead`` (declared so by another node) or ``left`` (shut down, its shards handed off).
    """

    node_id: str
    incarnation: str
    state: str
    heartbeat_age: float
    started_at: float
    pid: int | None
    host: str | None
    shards: int


@dataclass(frozen=True)
class RecoveryWork:
    """What recovery carries out for some shards: workflows with work, pending procedures, the
    workflows with a cancel waiting (carried out before their procedures run again)."""

    with_work: list[str]
    procedures: list[ProcedureRow]
    cancelling: set[str]


class ClusterEvents(Protocol):
    """What a cluster tells the runtime of its node, from the cluster's own thread."""

    def shards_gained(self, shards: set[int]) -> None:
        """Leases taken (a join, a handoff, a dead node's): recover the workflows of these."""

    def shards_lost(self, shards: set[int]) -> None:
        """Leases given up or found gone: writes for these are refused from now on; stop their
        workflows' actors."""

    def woken(self, workflow_ids: list[str]) -> None:
        """Workflows owned here that another node left a message (or a start) for."""

    def finished_elsewhere(self, workflow_ids: list[str]) -> None:
        """Workflows another node finished (wakes ``result()`` waiting here)."""


class Cluster(abc.ABC):
    """A store's membership of a cluster of nodes on one database (``Store.cluster()``)."""

    node_id: str
    shard_count: int

    @abc.abstractmethod
    def start(self, events: ClusterEvents) -> None:
        """Start the membership's thread (heartbeats, takeovers, wake-ups), telling ``events``."""

    @abc.abstractmethod
    def owned_shards(self) -> set[int]: ...

    @abc.abstractmethod
    def owns(self, workflow_id: str) -> bool:
        """True if ``workflow_id``'s shard is leased here (an unknown id: by its own hash)."""

    @abc.abstractmethod
    def shard_for(self, workflow_id: str) -> int:
        """The shard ``workflow_id`` is in (an unknown id: its own hash's)."""

    @abc.abstractmethod
    def owns_cached(self, workflow_id: str) -> bool | None:
        """``owns``, if the workflow's shard is known without a read (else None)."""

    @abc.abstractmethod
    def note_child(self, child_id: str, parent_id: str) -> None:
        """A child just created in its parent's step (in the parent's shard, by default)."""

    @abc.abstractmethod
    def alone(self) -> bool:
        """True if no other node was registered at the last round, live or not (nothing else
        appends to inboxes: a node cut off from the database appends again when it is back,
        before it has rejoined; only one that left, or whose process is known to have ended, is
        gone for good)."""

    @abc.abstractmethod
    def alone_mark(self) -> int | None:
        """None unless this node is alone (as ``alone``, at a recent round); else a number that
        changes once another node has been seen live: while it is the same, no other node can
        have written (a node that joins is seen before it has opened)."""

    @abc.abstractmethod
    def owns_new(self, workflow_id: str) -> bool:
        """True if a new root workflow ``workflow_id`` would be in a shard leased here."""

    @abc.abstractmethod
    def settled(self) -> bool:
        """True if the cluster has nothing in flight between nodes: no wake-up waits to be
        taken, and every shard is leased by a live node (``Cluster.idle`` of the test helper)."""

    @abc.abstractmethod
    def nodes(self) -> list[NodeRow]: ...

    @abc.abstractmethod
    def clock_offset(self) -> float:
        """The database's clock minus this process's, seconds (measured at each heartbeat)."""

    @abc.abstractmethod
    def publish_wake(self) -> None:
        """Tell the other nodes that wake-ups were committed for them (after the commit)."""

    @abc.abstractmethod
    def publish_done(self, workflow_ids: list[str]) -> None:
        """Tell the other nodes waiting on these workflows that they finished (after the
        commit)."""

    @abc.abstractmethod
    def publish_news(self, workflow_ids: list[str]) -> None:
        """Tell the other nodes waiting on these workflows that a step published or replied
        (after the commit); unlike ``publish_done``, their interest is kept."""

    @abc.abstractmethod
    def publish_interest(self, workflow_id: str) -> None:
        """Tell the other nodes that ``result()`` here waits on ``workflow_id`` (run elsewhere):
        whichever finishes it says so (``publish_done``)."""

    @abc.abstractmethod
    def recovery_work(self, shards: set[int]) -> RecoveryWork: ...

    @abc.abstractmethod
    def leave(self) -> None:
        """Hand every lease off to the other nodes and leave the cluster (at shutdown)."""


class StepStore(Protocol):
    """What the engine does to one workflow: its steps, the few writes a workflow actor makes
    besides (a signal kept in the inbox, a record written alone, a procedure's outcome), the reads
    of one workflow's state, and whether this node runs it. A workflow actor sees the store
    through this interface only (``actors._host.Host``)."""

    def owns(self, workflow_id: str) -> bool:
        """True if this store's owner runs ``workflow_id`` (a backend that owns everything it
        opened, as SQLite does, keeps this default)."""
        return True

    def remote_reads(self) -> bool:
        """True if a read is a round trip to a server (PostgreSQL), long enough for the engine to
        step other workflows meanwhile; a read of a local file (SQLite) is not."""
        return False

    def cluster(self) -> Cluster:
        """This store's node of the cluster on its database: for one that owns everything it
        opened (SQLite), a cluster of one (``persistence._solo.SoloCluster``), so that the
        runtime takes one path for one node and for many."""
        raise NotImplementedError

    def history_limit(self) -> int | None:
        """What ``keep_history`` was told (None until then: every step)."""
        raise NotImplementedError

    @abc.abstractmethod
    def submit_step(self, step: StepWrite, *, here: bool = False) -> Promise[StepAck]:
        """Queue ``step`` for the group-commit writer; the future resolves after COMMIT.

        ``here``: the calling thread is an engine thread, which commits what it staged at the end
        of its drain (``flush_staged``): the step is staged for that, not handed to the writer's
        thread. A caller's thread never asks."""

    @abc.abstractmethod
    def flush_staged(self) -> None:
        """Commit what engine threads staged (and whatever else is queued), on this thread, in
        one transaction (after the batch under way, if any)."""

    @abc.abstractmethod
    def staged_writes(self) -> int:
        """How many writes engine threads staged that no batch has taken yet."""

    def commit_step(self, step: StepWrite, timeout: float | None = None) -> StepAck:
        """``submit_step`` and wait for the commit."""
        return self.submit_step(step).result(timeout)

    @abc.abstractmethod
    def create_workflow(self, wf: NewWorkflow) -> bool:
        """Insert ``wf``; False (and nothing written) if the id exists."""

    @abc.abstractmethod
    def submit_append_inbox(
        self, workflow_id: str, kind: str, name: str, payload: bytes, *, at: float,
        external_seq: int | None = None,
    ) -> Promise[Delivered]:
        """``append_inbox``, queued: the future resolves after COMMIT."""

    @abc.abstractmethod
    def append_inbox(
        self, workflow_id: str, kind: str, name: str, payload: bytes, *, at: float,
        external_seq: int | None = None,
    ) -> Delivered:
        """Append a message to a running workflow's inbox (signal, cancel).

        ``external_seq``: the request (``post_external``) this carries out, deleted in the same
        transaction, so that a crash cannot leave it to be carried out twice.

        Raises ``UnknownWorkflowId`` for no such workflow, ``WorkflowFinished`` if it ended,
        ``InboxFull`` past the bound (and then the request stays).
        """

    @abc.abstractmethod
    def procedure_finished(
        self, key: str, *, result: bytes | None, error: str | None, attempts: int
    ) -> bool:
        """Record a procedure's outcome (status done or failed); False if the row is gone."""

    @abc.abstractmethod
    def load_workflow(self, workflow_id: str) -> WorkflowRecord | None: ...

    def load_workflows(self, workflow_ids: list[str]) -> dict[str, WorkflowRecord]:
        """The rows of those of ``workflow_ids`` that exist, by id (SQL stores: a statement per
        hundred ids, not one per id)."""
        return {wid: rec for wid in dict.fromkeys(workflow_ids) if (rec := self.load_workflow(wid)) is not None}

    def scheduled_tick(self, workflow_id: str) -> float | None:
        """The tick a schedule started ``workflow_id`` for (None: no schedule started it)."""
        return None

    def load_state(
        self, workflow_id: str
    ) -> tuple[WorkflowRecord | None, list[InboxRow], list[TimerRow], list[ProcedureRow]]:
        """The workflow's row, inbox, timers and procedures (one snapshot where the backend can)."""
        return (
            self.load_workflow(workflow_id),
            self.inbox(workflow_id),
            self.timers(workflow_id),
            self.procedures(workflow_id),
        )

    @abc.abstractmethod
    def inbox(self, workflow_id: str) -> list[InboxRow]:
        """The workflow's buffered messages, in arrival order."""

    @abc.abstractmethod
    def timers(self, workflow_id: str) -> list[TimerRow]: ...

    @abc.abstractmethod
    def procedures(self, workflow_id: str) -> list[ProcedureRow]: ...


class RecoveryStore(StepStore, Protocol):
    """What a system reads when it opens, and when a cluster's node takes shards over: the work
    its workflows left (scoped to what this store owns), and whether another writer left some."""

    @abc.abstractmethod
    def timers_due(self, before: float, limit: int) -> list[TimerRow]:
        """Timers due before ``before``, soonest first (by index)."""

    @abc.abstractmethod
    def procedures_to_run(self) -> Iterator[ProcedureRow]:
        """Every pending (not finished) procedure, for re-dispatch at recovery."""

    @abc.abstractmethod
    def workflows_with_work(self) -> Iterator[str]:
        """Ids of running workflows that have work now: an inbox message they can take (a signal
        they await, a cancel, a child outcome), a finished procedure, or a never-stepped start
        (step_seq 0). By index: cheap with millions of idle workflows."""

    def workflows_cancelling(self) -> set[str]:
        """Ids of the workflows with a cancel waiting in their inbox (recovery carries these out
        before it runs their procedures again). This default reads each inbox of
        ``workflows_with_work()``; a backend answers it with one query."""
        return {
            wid for wid in self.workflows_with_work()
            if any(r.kind == CANCEL for r in self.inbox(wid))
        }

    @abc.abstractmethod
    def count_workflows(self) -> dict[tuple[str, str], int]:
        """{(type, status): count}."""

    @abc.abstractmethod
    def changed(self) -> bool:
        """True if another writer may have left this owner work since the last call (a `wf`
        request, say): cheap, called every 50 ms (SQLite: ``PRAGMA data_version``)."""


class RequestStore(Protocol):
    """The requests other processes (``wf``, the web view) leave for the owner, and their answers."""

    @abc.abstractmethod
    def post_external(
        self, kind: str, workflow_id: str, name: str | None, payload: str | None, *, at: float
    ) -> int:
        """Append a request for the owner (works without owning the file). Returns its seq."""

    @abc.abstractmethod
    def take_external(self, after_seq: int) -> list[ExternalRow]:
        """Requests with seq > after_seq, oldest first (the owner deletes them when done)."""

    @abc.abstractmethod
    def delete_external(self, seqs: list[int]) -> None: ...

    @abc.abstractmethod
    def external_done(self, seq: int, result: str) -> None:
        """Delete the handled request ``seq`` and keep ``result`` for the process that posted it."""

    @abc.abstractmethod
    def take_external_result(self, seq: int) -> str | None:
        """The result left for request ``seq`` (removed as it is read), or None while not done."""


class RetentionStore(Protocol):
    """Retention: finished workflows deleted, and the tombstones they leave."""

    @abc.abstractmethod
    def prune_finished(self, before: float, limit: int = 1000, *, at: float | None = None) -> list[str]:
        """Delete up to ``limit`` workflows that finished at or before ``before``, oldest first, with
        every row they left, in one transaction; return their ids. Each leaves its tombstone,
        pruned ``at`` (epoch seconds; None: now)."""

    def tombstone(self, workflow_id: str) -> Tombstone | None:
        """What a pruned workflow of this id left (its tombstone), or None."""
        raise NotImplementedError

    def tombstones(self, workflow_ids: list[str]) -> dict[str, Tombstone]:
        """The tombstones of those of ``workflow_ids`` that have one, by id."""
        return {wid: t for wid in dict.fromkeys(workflow_ids) if (t := self.tombstone(wid)) is not None}

    def expire_tombstones(self, before: float) -> int:
        """Delete the tombstones left by prunes before ``before``; how many."""
        raise NotImplementedError

    def tombstone_count(self) -> int:
        """How many pruned workflows' ids are kept taken (their tombstones)."""
        raise NotImplementedError

    def oldest_reply(self) -> float | None:
        """When the earliest answered ask still kept was answered, or None."""
        raise NotImplementedError

    def expire_replies(self, before: float, limit: int = 1000) -> int:
        """Delete up to ``limit`` answered asks answered at or before ``before``, oldest first,
        in one transaction; how many. A pending ask is never deleted."""
        raise NotImplementedError

    @abc.abstractmethod
    def oldest_finished(self) -> float | None:
        """When the earliest finished workflow still kept ended, or None."""

    @abc.abstractmethod
    def newest_finished(self) -> float | None:
        """When the latest finished workflow ended, or None."""

    @abc.abstractmethod
    def pruned_total(self) -> int:
        """How many finished workflows were ever pruned from this store."""


class BrowseStore(Protocol):
    """What clients read: lists and pages of workflows, their children, history, subscriptions,
    published values and asks, and application tables."""

    @abc.abstractmethod
    def list_workflows(
        self,
        status: str | None = None,
        type: str | None = None,
        parent_id: str | None = None,
        limit: int | None = None,
    ) -> list[WorkflowRecord]: ...

    @abc.abstractmethod
    def browse_workflows(
        self,
        *,
        status: str | None = None,
        type: str | None = None,
        id_prefix: str | None = None,
        newest_first: bool = True,
        after: tuple[float, str] | None = None,
        limit: int = 50,
    ) -> list[WorkflowRecord]:
        """A page of the workflows matching every given filter, in creation order (newest first
        unless ``newest_first`` is false; ties by id), starting after the ``(created_at, id)``
        of the last row of the page before (keyset pagination: the same cost on any page).

        By index at any size: one short index range per status (see ``browse_check``).
        """

    def children_of(self, parent_ids: list[str], limit: int) -> dict[str, list[WorkflowRecord]]:
        """The first ``limit`` children of each of ``parent_ids`` (creation order), by parent.
        This default asks ``list_workflows`` once per parent; a backend answers in one query."""
        return {p: self.list_workflows(parent_id=p, limit=limit) for p in dict.fromkeys(parent_ids)}

    @abc.abstractmethod
    def subscriptions(self, workflow_id: str) -> list[tuple[str, str]]:
        """The workflow's broadcast subscriptions: ``(name, filter_key)``, by name."""

    @abc.abstractmethod
    def subscribers(self, name: str, filter_key: str) -> list[str]:
        """Ids of the workflows subscribed to ``(name, filter_key)``."""

    @abc.abstractmethod
    def history(self, workflow_id: str, limit: int = 100) -> list[HistoryRow]: ...

    @abc.abstractmethod
    def history_from(self, workflow_id: str, limit: int = 100) -> tuple[list[HistoryRow], int]:
        """``history``, and the position of its first row in the whole history (the entries
        before it that a history limit dropped, and those ``limit`` left out of what it read)."""

    def history_page(self, workflow_id: str, limit: int | None, before: int | None) -> tuple[list[HistoryRow], int]:
        """The newest ``limit`` rows (all: None) of the whole history before position
        ``before`` (None: up to the newest), and the position of the first: the page of
        ``history_from`` with no limit that ``ref.history()`` shows."""
        rows, first = self.history_from(workflow_id, limit=2**62)
        return page_of(rows, first, limit, before)

    def ask(self, workflow_id: str, ask_id: str) -> AskRow | None:
        """The ask ``ask_id`` of ``workflow_id`` as stored, or None."""
        raise NotImplementedError

    def running(self, workflow_id: str) -> bool | None:
        """True if the workflow runs, False if it ended, None if there is no such workflow."""
        raise NotImplementedError

    def published(self, workflow_id: str, key: str) -> bytes | None:
        """The value ``workflow_id`` last published under ``key`` (pickled), or None."""
        raise NotImplementedError

    def published_of(self, workflow_ids: list[str]) -> dict[str, dict[str, bytes]]:
        """Every value each of ``workflow_ids`` published, by workflow and key (pickled)."""
        raise NotImplementedError

    def inbox_depth(self) -> tuple[int, int]:
        """The messages waiting in the inboxes of the workflows this store owns (signals, asks,
        cancels and children's outcomes stored and not taken yet): in all, and in the fullest
        one workflow's (``InboxFull`` at the inbox limit)."""
        raise NotImplementedError

    def oldest_step_kept(self, workflow_id: str) -> int | None:
        """The number of the oldest step the workflow's history still holds (None: no step)."""
        raise NotImplementedError

    @abc.abstractmethod
    def read_table(self, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """A read-only query on the reader connection (for application tables the reducers fill)."""


@runtime_checkable
class Store(RecoveryStore, RequestStore, RetentionStore, BrowseStore, Protocol):
    """The interface the runtime talks to, whatever the backend. All methods are thread-safe.

    Everything specific to a backend (its SQL dialect, how it keeps a second owner out, how it
    learns of other writers) stays inside it. What the runtime would otherwise assume about being
    the only process is part of this interface, scoped to what this store **owns**: an owning store
    holds some (SQLite: all) of the workflows in the database, ``owns(id)`` says which, and the
    reads the runtime runs over "everything" (``timers_due``, ``procedures_to_run``,
    ``workflows_with_work``, ``workflows_cancelling``, ``take_external``) return only what belongs
    to owned workflows. A message a step delivers to a workflow owned elsewhere is the backend's to
    announce to its owner; ``changed()`` tells this owner that another writer may have left it
    work. SQLite owns the whole file (``owns`` is always true) and polls ``PRAGMA data_version``.

    It is the sum of the interfaces of its roles, each of which a part of the runtime sees alone:
    ``StepStore`` (what a workflow actor does: its steps and the reads around them),
    ``RecoveryStore`` (the work left when a system opens or takes shards over), ``RequestStore``
    (requests of other processes), ``RetentionStore`` and ``BrowseStore`` (what clients read).
    """

    # -- lifecycle, and the writes of the system's own API -----------------------------------
    @abc.abstractmethod
    def close(self) -> None: ...

    def keep_history(self, limit: int | None) -> None:
        """Keep the newest ``limit`` steps of each workflow's history (None: every step): what
        the system that owns the store was told (``ActorSystem(history_limit=...)``)."""
        raise NotImplementedError

    @abc.abstractmethod
    def create_workflows(self, wfs: list[NewWorkflow]) -> list[bool]:
        """Insert many workflows in one transaction; for each, False if its id existed."""

    @abc.abstractmethod
    def submit_create_workflows(self, wfs: list[NewWorkflow]) -> Promise[list[bool]]:
        """``create_workflows``, queued: the future resolves after COMMIT."""

    @abc.abstractmethod
    def submit_broadcast(
        self, name: str, filter_key: str, payload: bytes, *, at: float
    ) -> Promise[tuple[list[Delivered], list[tuple[str, Dropped]]]]:
        """``broadcast``, queued: the future resolves after COMMIT with what was delivered and
        what was dropped (``(workflow_id, why)``)."""

    @abc.abstractmethod
    def barrier(self, timeout: float | None = None) -> None:
        """Return once every write queued before this call has committed or failed."""

    @abc.abstractmethod
    def broadcast(
        self, name: str, filter_key: str, payload: bytes, *, at: float,
        dropped: list[tuple[str, Dropped]] | None = None,
    ) -> list[Delivered]:
        """Append a signal to every subscriber of ``(name, filter_key)``, in one transaction.

        ``dropped``, if given, receives ``(workflow_id, why)`` for each subscriber that did not
        take it (an inbox full, a workflow that ended).
        """

    @abc.abstractmethod
    def procedure_retry(self, key: str, *, attempts: int, next_attempt_at: float) -> bool:
        """Record a failed attempt and when to try again; False if the row is gone."""

    def submit_ask(
        self, workflow_id: str, ask_id: str, name: str, payload: bytes, *, at: float
    ) -> Promise[tuple[AskRow | None, Delivered | None]]:
        """Store an ask with its request in the workflow's inbox (or find the one stored under
        that id), queued: resolves after COMMIT with ``(row found, None)`` or ``(None, request
        delivered)``; raises ``UnknownWorkflowId`` or ``WorkflowFinished`` for a new one."""
        raise NotImplementedError


def browse_check(
    status: str | None, id_prefix: str | None, after: tuple[float, str] | None, limit: int
) -> tuple[str, ...]:
    """Check ``browse_workflows``' arguments; return the statuses it reads, one index range each."""
    if status is not None and status not in STATUSES:
        raise ValueError(f"status must be one of {', '.join(STATUSES)} or None, got {status!r}")
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise ValueError(f"browse_workflows() limit must be a positive int, got {limit!r}")
    if id_prefix is not None and not isinstance(id_prefix, str):
        raise ValueError(f"id_prefix must be a str or None, got {id_prefix!r}")
    if after is not None and not (
        isinstance(after, tuple) and len(after) == 2 and isinstance(after[0], (int, float))
        and isinstance(after[1], str)
    ):
        raise ValueError(f"after must be a (created_at, id) pair or None, got {after!r}")
    return (status,) if status is not None else STATUSES


def merge_pages(
    pages: list[list[WorkflowRecord]], newest_first: bool, limit: int
) -> list[WorkflowRecord]:
    """One page from a page per status (each already in order): the first ``limit`` of them all."""
    rows = [r for page in pages for r in page]
    rows.sort(key=lambda r: (r.created_at, r.id), reverse=newest_first)
    return rows[:limit]


def page_of(rows: list[HistoryRow], first: int, limit: int | None, before: int | None) -> tuple[list[HistoryRow], int]:
    """Of ``rows`` (the whole history kept, its first at position ``first``), the newest
    ``limit`` (all: None) before position ``before`` (None: up to the newest), and the position
    of the first of them."""
    end = len(rows) if before is None else max(0, min(before - first, len(rows)))
    start = 0 if limit is None else max(0, end - limit)
    return rows[start:end], first + start
