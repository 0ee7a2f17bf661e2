"""The store's errors: one root, subclasses that carry what happened and where."""

from __future__ import annotations

import os
import socket


def rebuilt_error(cls: type[BaseException], args: tuple[object, ...], state: dict[str, object]) -> BaseException:
    """An error of ``cls`` as pickled: its args and attributes, without running its
    ``__init__`` (whose parameters are not its args)."""
    error = cls.__new__(cls)
    error.args = args
    error.__dict__.update(state)
    return error


class PersistenceError(Exception):
    """Root of every error the store raises.

    Attributes:
        path: The database file involved (``":memory:"`` for a throwaway store), or None.
    """

    def __init__(self, message: str, *, path: str | None = None) -> None:
        super().__init__(message)
        self.path = path

    def __reduce__(self) -> tuple[object, ...]:
        # Pickled and copied as they are (to another process, by copy.copy): the __init__ of
        # most takes other parameters than their args, which the default way passes it again.
        return (rebuilt_error, (type(self), self.args, dict(self.__dict__)))


class DatabaseLocked(PersistenceError):
    """The file is owned by another running system."""

    def __init__(
        self, path: str, *, pid: int | None, host: str | None, since: str | None,
        through_link: bool = False,
    ) -> None:
        # The owner opened the same file by another path: a symbolic or a hard link.
        via = " (through another path to the same file: a symbolic or hard link)" if through_link else ""
        if pid == os.getpid() and host == socket.gethostname():
            what = (
                f"database {path} is owned by another ActorSystem (or store) in this very process"
                f"{via} (since {since}); only one may own a file. Shut that one down first (or use "
                f"it), or open the file with owner=False to read it."
            )
        else:
            who = (f"process {pid} on host {host!r}" + (f" (since {since})" if since else "")
                   if pid else "another process")
            what = (
                f"database {path} is owned by {who}{via}; only one running system may own a file. "
                f"Stop that process, or open the file with owner=False (as the wf CLI does) to "
                f"read it and post requests to its owner."
            )
        super().__init__(what, path=path)
        self.pid = pid
        self.host = host
        self.since = since


class ForeignDatabase(PersistenceError):
    """The file is a SQLite database of another application."""


class SchemaTooNew(PersistenceError):
    """The file was written by a newer actorflow with a schema this version cannot read."""

    def __init__(self, path: str, *, found: int, supported: int) -> None:
        super().__init__(
            f"database {path} has schema version {found}, but this actorflow reads versions up to "
            f"{supported}; upgrade actorflow to open it (downgrading a database is not supported).",
            path=path,
        )
        self.found = found
        self.supported = supported


class CorruptDatabase(PersistenceError):
    """The file is not a SQLite database, or its pages are malformed."""


class ReadOnlyDatabase(PersistenceError):
    """The file, or the directory that holds it, cannot be written."""


class StorageUnavailable(PersistenceError):
    """A write failed for a reason of the storage that may pass: a full disk, an I/O error, a
    database busy past its timeout. Nothing of the write was committed; the same write may
    succeed later, and the runtime retries it (these are not faults of a workflow)."""


class DiskFull(StorageUnavailable):
    """A write failed because the disk (or the database's page limit) is full."""


class DatabaseBusy(StorageUnavailable):
    """The database stayed locked by another connection past the busy timeout."""


class StorageIOError(StorageUnavailable):
    """The operating system reported an I/O error reading or writing the database."""


class StaleStep(PersistenceError):
    """A step's guard failed: its step_seq is not the next one, or a row it consumes is gone.

    Attributes:
        workflow_id: The workflow the step belongs to.
    """

    def __init__(self, message: str, *, path: str | None, workflow_id: str) -> None:
        super().__init__(message, path=path)
        self.workflow_id = workflow_id


class ReducerFailed(PersistenceError):
    """A step was rolled back because one of its reducers raised.

    Attributes:
        workflow_id: The workflow the step belongs to.
        reducer: The name of the reducer that raised.
        original: The exception the reducer raised (also ``__cause__``).
    """

    def __init__(
        self, *, path: str | None, workflow_id: str, reducer: str, original: BaseException
    ) -> None:
        super().__init__(
            f"reducer {reducer} of workflow {workflow_id!r} raised "
            f"{type(original).__name__}: {original}; the whole step was rolled back in {path}, "
            f"nothing of it was written. The runtime runs the step again from the workflow's "
            f"last checkpoint (restarting its actor with backoff), and fails the workflow once "
            f"that has happened more often than its restart intensity allows (5 times in 60 s): "
            f"fix the reducer.",
            path=path,
        )
        self.workflow_id = workflow_id
        self.reducer = reducer
        self.original = original


class UnknownWorkflowId(PersistenceError):
    """No workflow with this id exists in the file."""

    def __init__(self, workflow_id: str, *, path: str | None) -> None:
        super().__init__(
            f"no workflow with id {workflow_id!r} in {path}; check the id (list them with "
            f"`wf list --db {path}`).",
            path=path,
        )
        self.workflow_id = workflow_id


class WorkflowFinished(PersistenceError):
    """The workflow has ended; it takes no more messages or steps."""

    def __init__(self, workflow_id: str, status: str, *, path: str | None) -> None:
        super().__init__(
            f"workflow {workflow_id!r} in {path} is already {status}; it takes no more messages. "
            f"Start a new workflow (with a new id) to continue.",
            path=path,
        )
        self.workflow_id = workflow_id
        self.status = status


class WorkflowExists(PersistenceError):
    """A step tried to create a workflow whose id is already taken."""

    def __init__(self, workflow_id: str, *, parent_id: str | None, path: str | None) -> None:
        super().__init__(
            f"workflow {parent_id!r} tried to create child {workflow_id!r} in {path}, but a "
            f"workflow with that id already exists; the step was rolled back. Give the child a "
            f"unique id (or none, to get a generated one)."
            if parent_id is not None
            else f"workflow {workflow_id!r} cannot be created in {path}: a workflow with that id "
            f"already exists; its first step was rolled back. Start it under another id.",
            path=path,
        )
        self.workflow_id = workflow_id
        self.parent_id = parent_id


class InboxFull(PersistenceError):
    """The workflow's inbox holds as many buffered signals (or asks, ``what="asks"``) as the
    store allows."""

    def __init__(self, workflow_id: str, *, limit: int, path: str | None, what: str = "signals") -> None:
        kind = "requests" if what == "asks" else what
        super().__init__(
            f"inbox of workflow {workflow_id!r} in {path} is full: it already buffers {limit} "
            f"{what} it has not consumed. Make the workflow await (or select on) the {kind} it "
            f"is sent, send fewer, or raise the bound (ActorSystem(inbox_limit=...), or "
            f"open_store(..., inbox_limit=...)).",
            path=path,
        )
        self.workflow_id = workflow_id
        self.limit = limit


class MalformedPayload(PersistenceError):
    """Bytes handed to ``loads`` are not a payload written by ``dumps``."""


class StoreClosed(PersistenceError):
    """The store was used after ``close()``."""


class Fenced(PersistenceError):
    """A write for a shard this node no longer leases: refused, nothing of it was committed.

    The shard moved to another node (this one was declared dead: frozen, cut off, or its session
    ended), whose lease now has a newer epoch. The workflow goes on there; this node drops it.

    Attributes:
        shard: The shard whose lease was lost.
        epoch: The epoch (fencing token) this node held for it, or None if it held none.
    """

    def __init__(self, message: str, *, path: str | None = None, shard: int, epoch: int | None) -> None:
        super().__init__(message, path=path)
        self.shard = shard
        self.epoch = epoch


class NodeIdInUse(DatabaseLocked):
    """Another live process runs a node under the same ``node_id`` on this database."""

    def __init__(self, path: str, *, node_id: str, pid: int | None, host: str | None, since: str | None) -> None:
        if pid == os.getpid() and host == socket.gethostname():
            what = (
                f"node_id {node_id!r} is in use on {path}: the database is owned by another "
                f"ActorSystem (or store) in this very process under that node_id (since {since}). "
                f"Shut that one down first (or use it), or give this one another node_id "
                f"(ActorSystem(url, node_id=...))."
            )
        else:
            what = (
                f"node_id {node_id!r} is in use on {path} by a live node (process {pid} on host "
                f"{host!r}, since {since}); two processes may not run under one node_id. Give "
                f"this process another node_id (ActorSystem(url, node_id=...)), or stop the other."
            )
        PersistenceError.__init__(self, what, path=path)
        self.pid = pid
        self.host = host
        self.since = since
        self.node_id = node_id
