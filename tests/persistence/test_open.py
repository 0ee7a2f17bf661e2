"""Opening files: creation, ownership, the schema version, and every kind of bad file."""

from __future__ import annotations

import contextlib
import os
import pathlib
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from typing import Any

import pytest

from persistence import (
    APPLICATION_ID,
    SCHEMA_VERSION,
    CorruptDatabase,
    DatabaseLocked,
    ForeignDatabase,
    PersistenceError,
    ReadOnlyDatabase,
    SchemaTooNew,
    StoreClosed,
    open_store,
)
from persistence._sqlite._schema import MIGRATIONS

from .conftest import new_wf

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_new_file_gets_schema_and_marks(db_path: str) -> None:
    """A new file gets the schema, the application id, the version, WAL mode and a meta table."""
    open_store(db_path).close()
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert {"meta", "workflows", "inbox", "waits", "timers", "procedures", "subscriptions",
            "history", "external"} <= tables
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    assert meta["owner_pid"] == str(os.getpid())


def test_reopen_keeps_data(db_path: str) -> None:
    """Data written by one store is there after close and reopen."""
    with open_store(db_path) as s:
        s.create_workflow(new_wf("a"))
    with open_store(db_path) as s:
        assert s.load_workflow("a").type == "mod:wf"


@pytest.mark.parametrize("durability,level", [("normal", 1), ("full", 2)])
def test_durability_sets_synchronous(db_path: str, durability: str, level: int) -> None:
    """durability maps to synchronous NORMAL (1) or FULL (2) on the write connection."""
    with open_store(db_path, durability=durability) as s:
        got = s._write_wait(lambda w: w.conn.execute("PRAGMA synchronous").fetchone()[0])
    assert got == level


def test_bad_arguments(db_path: str) -> None:
    """Unknown durability or a non-positive inbox_limit are refused with ValueError."""
    with pytest.raises(ValueError, match="durability must be one of"):
        open_store(db_path, durability="eventually")
    with pytest.raises(ValueError, match="inbox_limit"):
        open_store(db_path, inbox_limit=0)


def test_second_owner_in_same_process_locked(db_path: str) -> None:
    """A second owner in the same process gets DatabaseLocked with pid, host and since, saying
    that the owner is in this very process (not to stop a process, which would be itself)."""
    with open_store(db_path):
        with pytest.raises(DatabaseLocked) as info:
            open_store(db_path)
    err = info.value
    assert err.pid == os.getpid() and err.host and err.since
    assert "in this very process" in str(err) and "Shut that one down" in str(err)
    assert db_path in str(err) and "owner=False" in str(err) and err.since in str(err)


def test_second_owner_in_other_process_locked(db_path: str) -> None:
    """An owner in another process blocks this one; its death (SIGKILL) frees the file."""
    code = textwrap.dedent(f"""
        import sys, time
        from persistence import open_store
        s = open_store({db_path!r})
        print("ready", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(DatabaseLocked) as info:
            open_store(db_path)
        assert info.value.pid == proc.pid
        with open_store(db_path, owner=False) as reader:
            assert reader.owner_info()["pid"] == proc.pid
        proc.kill()
        proc.wait(timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    with open_store(db_path) as s:
        assert s.owner_info()["pid"] == os.getpid()


def _links(db_path: str) -> list[str]:
    """A symbolic and a hard link to ``db_path`` (an existing file), in another directory."""
    other = pathlib.Path(db_path).parent / "elsewhere"
    other.mkdir()
    (other / "sym.db").symlink_to(db_path)
    os.link(db_path, other / "hard.db")
    return [str(other / "sym.db"), str(other / "hard.db")]


def test_second_owner_through_a_link_locked(db_path: str) -> None:
    """A second owner that opens the same file through a symbolic or a hard link is refused with
    DatabaseLocked saying so (the lock was on the path as given: both owned the file)."""
    open_store(db_path).close()
    links = _links(db_path)
    for first in [db_path, *links]:
        with open_store(first) as s:
            s.create_workflow(new_wf(f"by-{os.path.basename(first)}"))
            for second in {db_path, *links} - {first}:
                with pytest.raises(DatabaseLocked, match="in this very process") as info:
                    open_store(second)
                assert info.value.pid == os.getpid()
                if os.path.realpath(second) != os.path.realpath(first):
                    assert "a symbolic or hard link" in str(info.value)
    # Every lock was released: each path opens again, and all see the same rows.
    for path in [db_path, *links]:
        with open_store(path) as s:
            assert {w.id for w in s.list_workflows()} == {"by-wf.db", "by-sym.db", "by-hard.db"}


def test_second_owner_in_other_process_through_a_hard_link_locked(db_path: str) -> None:
    """An owner in another process that opened a hard link to the file blocks this one, which is
    told that process's pid; its death (SIGKILL) frees the file for every path."""
    open_store(db_path).close()
    hard = _links(db_path)[1]
    code = textwrap.dedent(f"""
        import sys
        from persistence import open_store
        s = open_store({hard!r})
        print("ready", flush=True)
        sys.stdin.read()
    """)
    proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        with pytest.raises(DatabaseLocked, match="a symbolic or hard link") as info:
            open_store(db_path)
        assert info.value.pid == proc.pid
        proc.kill()
        proc.wait(timeout=10)
    finally:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
    open_store(db_path).close()


def test_reader_keeps_its_locks_when_an_owner_closes(db_path: str) -> None:
    """Closing an owner does not close a descriptor of the file while a reader of this process
    has it open (closing any descriptor of a file drops all of a process's POSIX locks on it,
    SQLite's included): the descriptor is kept, reused by the next owner, and closed later."""
    import persistence._sqlite._ownership as ownership

    open_store(db_path).close()
    with open_store(db_path, owner=False) as reader:
        st = os.stat(db_path)
        for _ in range(3):
            open_store(db_path).close()
            assert len(ownership._kept[(st.st_dev, st.st_ino)]) == 1  # kept once, reused
        assert reader.list_workflows() == []
    open_store(db_path).close()
    assert (st.st_dev, st.st_ino) not in ownership._kept


def test_lock_released_on_close(db_path: str) -> None:
    """close() gives up ownership: a new owner can open the file, owner_info is then None."""
    open_store(db_path).close()
    with open_store(db_path, owner=False) as reader:
        assert reader.owner_info() is None
    open_store(db_path).close()


def test_foreign_database(db_path: str) -> None:
    """Another application's SQLite file is refused untouched with ForeignDatabase."""
    conn = sqlite3.connect(db_path)
    conn.execute("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    conn.commit()
    conn.close()
    before = pathlib.Path(db_path).read_bytes()
    for owner in (True, False):
        with pytest.raises(ForeignDatabase, match="customers") as info:
            open_store(db_path, owner=owner)
        assert db_path in str(info.value)
    assert pathlib.Path(db_path).read_bytes() == before
    assert not pathlib.Path(db_path + ".lock").exists()  # nothing is left beside it either


def test_foreign_application_id(db_path: str) -> None:
    """A file with another application_id is foreign even with no tables."""
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA application_id = 1234")
    conn.close()
    with pytest.raises(ForeignDatabase, match="0x4d2"):
        open_store(db_path)


def test_bare_file_marked_only_by_user_version(db_path: str) -> None:
    """A SQLite file with no tables and no application_id whose user_version another program set
    is refused as not an actorflow database, by owners and readers, and left unchanged (it gave
    a raw "no such table" error, and a reader was told to initialise it)."""
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA user_version = 1")
    conn.close()
    before = pathlib.Path(db_path).read_bytes()
    for owner in (True, False):
        with pytest.raises(ForeignDatabase, match="not an actorflow database.*user_version is 1"):
            open_store(db_path, owner=owner)
    assert pathlib.Path(db_path).read_bytes() == before
    assert not pathlib.Path(db_path + ".lock").exists()


def test_empty_sqlite_file_is_initialised(db_path: str) -> None:
    """An empty file (0 bytes) becomes an actorflow database."""
    pathlib.Path(db_path).touch()
    with open_store(db_path) as s:
        assert s.create_workflow(new_wf("a"))


def test_schema_too_new(db_path: str) -> None:
    """A file with a newer schema version raises SchemaTooNew for owners and readers."""
    open_store(db_path).close()
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    for owner in (True, False):
        with pytest.raises(SchemaTooNew, match="upgrade actorflow") as info:
            open_store(db_path, owner=owner)
        assert info.value.found == SCHEMA_VERSION + 1
        assert "development build" not in str(info.value)
    # The owner lock was released on failure.
    conn = sqlite3.connect(db_path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
    conn.close()
    open_store(db_path).close()


def _development_file(path: str, version: int) -> None:
    """A file as a development build before 0.1.0 left it: actorflow's mark, a schema version
    of the pre-release numbering, and a workflows table with the ``restarts`` column those
    builds' first version had, but no ``schema_line`` mark in its meta table."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    conn.execute(
        "CREATE TABLE workflows (id TEXT PRIMARY KEY, type TEXT NOT NULL, status TEXT NOT NULL, "
        "step_seq INTEGER NOT NULL DEFAULT 0, restarts INTEGER NOT NULL DEFAULT 0)"
    )
    conn.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    conn.execute(f"PRAGMA user_version = {version}")
    conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(version),))
    conn.execute("INSERT INTO workflows (id, type, status) VALUES ('old', 'mod:wf', 'running')")
    conn.close()


@pytest.mark.parametrize("version", [1, 2, 3, 4, 5])
def test_development_build_file_is_refused_and_left_alone(db_path: str, version: int) -> None:
    """A file of a development build before 0.1.0 (versions 1 to 5 of the pre-release
    numbering) is refused by owners and readers alike, as such, with what to do: not migrated,
    not "too new", and left as it was."""
    _development_file(db_path, version)
    before = pathlib.Path(db_path).read_bytes()
    for owner in (True, False):
        with pytest.raises(PersistenceError) as info:
            open_store(db_path, owner=owner)
        assert not isinstance(info.value, (SchemaTooNew, ForeignDatabase))
        message = str(info.value)
        assert f"{db_path} was made by a development build of actorflow from before 0.1.0" in message
        assert f"schema version {version} of the pre-release numbering" in message
        assert "Recreate it: move the file away" in message
    assert pathlib.Path(db_path).read_bytes() == before
    # Recreated, the path works.
    os.remove(db_path)
    with open_store(db_path) as s:
        assert s.create_workflow(new_wf("a"))


def test_schema_has_three_versions_and_marks_its_line(db_path: str) -> None:
    """Version 1 is the first released schema, version 2 adds the index of answered asks and
    version 3 narrows the indexes a workflow's first and last steps write; a new file runs all
    three and carries the released line's mark, which is what tells it from a development
    build's file of the same number."""
    assert (SCHEMA_VERSION, len(MIGRATIONS)) == (3, 3)
    open_store(db_path).close()
    conn = sqlite3.connect(db_path)
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    assert (meta["schema_line"], meta["schema_version"]) == ("release", "3")
    columns = [r[1] for r in conn.execute("PRAGMA table_info(workflows)")]
    assert "restarts" not in columns and {"recent_steps", "finished_at"} <= set(columns)
    conn.close()
    _assert_version_3_layout(db_path)


def _indexes(path: str) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    finally:
        conn.close()


def _assert_version_3_layout(path: str) -> None:
    conn = sqlite3.connect(path)
    try:
        sql = dict(conn.execute("SELECT name, sql FROM sqlite_master WHERE sql IS NOT NULL"))
    finally:
        conn.close()
    assert "workflows_running" not in sql
    assert sql["workflows_parent"].endswith("WHERE parent_id IS NOT NULL")
    assert sql["waits"].endswith("WITHOUT ROWID")
    assert {"asks_answered", "workflows_listed", "workflows_type"} <= set(sql)


def _stepped(wid: str, parent_id: str | None = None, waits: tuple[str, ...] = ()) -> tuple[Any, Any]:
    """A workflow record and its first step, awaiting the signals ``waits``."""
    from persistence import StepWrite

    wf = new_wf(wid, parent_id=parent_id)
    return wf, StepWrite(workflow_id=wid, step_seq=1, updated_at=1.0, continuation=b"c", create=wf,
                         waiting_on="{}", wait_signals=waits)


def test_a_file_of_version_1_is_migrated_to_version_3_by_its_owner(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file of version 1 (the first released schema) keeps its data and gets the later
    versions' indexes and layout when an owner opens it (a reader reads it as it is); its
    answered asks can then be swept."""
    from persistence._sqlite import _schema

    with monkeypatch.context() as m:
        m.setattr(_schema, "SCHEMA_VERSION", 1)
        with open_store(db_path) as s:
            s.create_workflow(new_wf("a"))
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 1
    conn.close()
    assert "asks_answered" not in _indexes(db_path)
    with open_store(db_path, owner=False) as r:  # read as it is: the later versions change indexes
        assert r.load_workflow("a") is not None
        assert r.running_count() == 1
    assert "asks_answered" not in _indexes(db_path)
    with monkeypatch.context() as m:  # a version a reader cannot read as it is: refused
        m.setattr(_schema, "READABLE_FROM", 2)
        with pytest.raises(PersistenceError, match="has schema version 1, older than this actorflow's 3"):
            open_store(db_path, owner=False)
    with open_store(db_path) as s:
        assert s.load_workflow("a") is not None
        assert (s.oldest_reply(), s.expire_replies(1e12)) == (None, 0)
    _assert_version_3_layout(db_path)
    conn = sqlite3.connect(db_path)
    assert conn.execute("PRAGMA user_version").fetchone()[0] == 3
    meta = dict(conn.execute("SELECT key, value FROM meta"))
    conn.close()
    assert meta["schema_version"] == "3" and {"migrated_to_2_at", "migrated_to_3_at"} <= set(meta)
    with open_store(db_path, owner=False) as r:
        assert r.load_workflow("a") is not None


def test_a_file_of_version_2_keeps_its_waits_children_and_running_workflows_in_version_3(
    db_path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What version 3 moves or re-indexes is all there after the migration: the signals each
    waiting workflow awaits (what a signal sent to it is checked against), the children of a
    parent, the running workflows counted."""
    from persistence._sqlite import _schema

    with monkeypatch.context() as m:
        m.setattr(_schema, "SCHEMA_VERSION", 2)
        with open_store(db_path) as s:
            for wid, parent, waits in (("p", None, ("go",)), ("c1", "p", ("x", "y")), ("c2", "p", ())):
                wf, step = _stepped(wid, parent, waits)
                s.commit_step(step)
        assert "workflows_running" in _indexes(db_path)
    with open_store(db_path, owner=False) as r:  # read as it is
        assert r.running_count() == 3
        assert [w.id for w in r.children_of(["p"], 10)["p"]] == ["c1", "c2"]
    with open_store(db_path) as s:
        assert s.running_count() == 3
        assert sorted(w.id for w in s.children_of(["p", "c1"], 10)["p"]) == ["c1", "c2"]
        assert s.children_of(["c1"], 10) == {"c1": []}
        waits = s.read_table("SELECT workflow_id, name FROM waits ORDER BY workflow_id, name")
        assert [(w["workflow_id"], w["name"]) for w in waits] == [("c1", "x"), ("c1", "y"), ("p", "go")]
        wf, step = _stepped("new", None, ("z",))
        s.commit_step(step)
        assert s.running_count() == 4
    _assert_version_3_layout(db_path)


def test_garbage_file(db_path: str) -> None:
    """A file that is not SQLite at all raises CorruptDatabase and is left unchanged."""
    junk = b"this is a text file, not a database\n" * 200
    pathlib.Path(db_path).write_bytes(junk)
    for owner in (True, False):
        with pytest.raises(CorruptDatabase, match="not a usable SQLite database"):
            open_store(db_path, owner=owner)
    assert pathlib.Path(db_path).read_bytes() == junk
    assert not pathlib.Path(db_path + ".lock").exists()


def test_malformed_database(db_path: str) -> None:
    """A SQLite file with damaged pages raises CorruptDatabase (on open or on first read)."""
    with open_store(db_path) as s:
        for i in range(300):
            s.create_workflow(new_wf(f"w{i}"))
    conn = sqlite3.connect(db_path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(pathlib.Path(db_path).read_bytes())
    page = 4096
    for p in range(1, len(data) // page):
        data[p * page : p * page + 200] = b"\xff" * 200
    pathlib.Path(db_path).write_bytes(bytes(data))
    with pytest.raises(CorruptDatabase):
        s = open_store(db_path)
        try:
            s.list_workflows()
        finally:
            s.close()


def test_missing_directory(tmp_path: pathlib.Path) -> None:
    """A path in a directory that does not exist is refused, naming the directory."""
    with pytest.raises(PersistenceError, match="does not exist"):
        open_store(str(tmp_path / "nope" / "wf.db"))


def test_directory_as_path(tmp_path: pathlib.Path) -> None:
    """A directory given as the database path is refused."""
    with pytest.raises(PersistenceError, match="is a directory"):
        open_store(str(tmp_path))


def test_reader_on_missing_file(db_path: str) -> None:
    """owner=False on a file that does not exist says so, and creates nothing."""
    with pytest.raises(PersistenceError, match="no database at"):
        open_store(db_path, owner=False)
    assert not os.path.exists(db_path)


def test_reader_on_uninitialised_file(db_path: str) -> None:
    """owner=False on an empty file says the system must start on it first."""
    pathlib.Path(db_path).touch()
    with pytest.raises(PersistenceError, match="no actorflow data yet"):
        open_store(db_path, owner=False)


def test_reader_cannot_write(file_store, db_path: str) -> None:
    """A non-owner store refuses writes other than post_external, saying why."""
    with open_store(db_path, owner=False) as reader:
        with pytest.raises(PersistenceError, match="owner=False"):
            reader.create_workflow(new_wf("x"))
        with pytest.raises(PersistenceError, match="owner=False"):
            reader.append_inbox("x", "signal", "s", b"", at=1.0)


def test_closed_store_refuses(db_path: str) -> None:
    """Every call after close() raises StoreClosed; close() is idempotent."""
    s = open_store(db_path)
    s.close()
    s.close()
    with pytest.raises(StoreClosed):
        s.load_workflow("a")
    with pytest.raises(StoreClosed):
        s.create_workflow(new_wf("a"))
    with pytest.raises(StoreClosed):
        s.changed()


def test_memory_stores_are_separate() -> None:
    """Two ':memory:' stores are two databases."""
    with open_store(":memory:") as a, open_store(":memory:") as b:
        a.create_workflow(new_wf("x"))
        assert b.load_workflow("x") is None
        assert a.load_workflow("x") is not None


# -- read-only files and directories, full disks -----------------------------------------------

def _immutable(path: pathlib.Path) -> contextlib.AbstractContextManager:
    """Make ``path`` unwritable even for root (chmod, then chattr +i); skip if impossible."""

    @contextlib.contextmanager
    def cm():
        mode = path.stat().st_mode
        path.chmod(0o555 if path.is_dir() else 0o444)
        chattr = False
        if os.access(path, os.W_OK):
            chattr = subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0
            if not chattr:
                path.chmod(mode)
                pytest.skip("cannot make a file read-only here (root without chattr)")
        try:
            yield
        finally:
            if chattr:
                subprocess.run(["chattr", "-i", str(path)], check=True)
            path.chmod(mode)

    return cm()


def test_read_only_file(db_path: str) -> None:
    """An owner on a read-only file gets ReadOnlyDatabase; a reader can still read it."""
    with open_store(db_path) as s:
        s.create_workflow(new_wf("a"))
    with _immutable(pathlib.Path(db_path)):
        with pytest.raises(ReadOnlyDatabase, match="read-only") as info:
            open_store(db_path)
        assert db_path in str(info.value)
        with open_store(db_path, owner=False) as reader:
            assert reader.load_workflow("a") is not None


def test_read_only_directory(tmp_path: pathlib.Path) -> None:
    """An owner in a read-only directory gets ReadOnlyDatabase naming the directory."""
    d = tmp_path / "ro"
    d.mkdir()
    with _immutable(d):
        with pytest.raises(ReadOnlyDatabase, match="read-only") as info:
            open_store(str(d / "wf.db"))
        assert str(d) in str(info.value)


def test_lock_file_this_user_may_not_open_is_named(db_path: str, monkeypatch) -> None:
    """A lock file that exists but this user may not open (another user's) is named as such; the
    message blamed a read-only directory, which it is not."""
    import errno

    import persistence._sqlite._ownership as ownership

    open_store(db_path).close()  # the lock file now exists
    real_open = os.open

    def denied(path, flags, *args):
        if str(path).endswith(".lock"):
            raise PermissionError(errno.EACCES, "Permission denied", path)
        return real_open(path, flags, *args)

    with monkeypatch.context() as m:
        m.setattr(ownership.os, "open", denied)
        with pytest.raises(ReadOnlyDatabase, match=r"it exists, owned by uid \d+, and this user") as info:
            open_store(db_path)
    assert "directory is read-only" not in str(info.value)


def test_reader_in_a_read_only_directory(db_path: str, monkeypatch) -> None:
    """A reader of a file whose directory it may not write (SQLite cannot create the -shm file
    there) reads it immutable when no write-ahead log is left, and says why not when one is."""
    import persistence._sqlite._store

    with open_store(db_path) as s:
        s.create_workflow(new_wf("a"))
    assert not os.path.exists(db_path + "-wal") or os.path.getsize(db_path + "-wal") == 0
    directory = os.path.dirname(db_path)
    real_access = os.access
    monkeypatch.setattr(persistence._sqlite._store.os, "access",
                        lambda p, mode: False if p == directory else real_access(p, mode))
    with open_store(db_path, owner=False) as reader:
        assert reader._immutable  # no -shm file needed
        assert reader.load_workflow("a").type == "mod:wf"
        assert [w.id for w in reader.list_workflows()] == ["a"]
    pathlib.Path(db_path + "-wal").write_bytes(b"\0" * 4096)  # a log not yet in the file
    with pytest.raises(ReadOnlyDatabase, match=r"directory .* is read-only, and SQLite must create"):
        open_store(db_path, owner=False)


def _as_other_user(code: str, directory: pathlib.Path) -> str:
    """Run ``code`` in a fresh interpreter as a user who is not root (permission bits bind
    only such a user), in ``directory`` made theirs; return its output."""
    import shutil

    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("running as root without setpriv: no way to run as a user that "
                        "permission bits bind")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]  # nobody
        probe = subprocess.run([*prefix, sys.executable, "-c", "pass"], cwd=ROOT,
                               capture_output=True, text=True, timeout=60)
        if probe.returncode != 0:
            # An interpreter installed under root's home (pyenv) may not load for another user.
            pytest.skip(f"this Python cannot run as an unprivileged user: {probe.stderr.strip()}")
        os.chown(directory, 65534, 65534)
    proc = subprocess.run([*prefix, sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.fixture
def shared_dir() -> Iterator[pathlib.Path]:
    """A directory another user may use (pytest's own is private to this user)."""
    import shutil
    import tempfile

    d = pathlib.Path(tempfile.mkdtemp(prefix="actorflow-ro-"))
    os.chmod(d, 0o755)
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_reader_of_a_read_only_file_leaves_no_read_only_shm(shared_dir: pathlib.Path) -> None:
    """A reader (``wf``) of a read-only file leaves no -shm file behind (SQLite made it read-only,
    as the file was), so the owner runs once the file is writable again; it was refused with a
    message blaming the file and the directory, both writable."""
    db = str(shared_dir / "wf.db")
    out = _as_other_user(f"""
        import os
        from persistence import open_store
        with open_store({db!r}) as s:
            s.create_workflow(__import__("persistence").NewWorkflow(
                id="a", type="m:w", continuation=b"c", fingerprint="f", created_at=1.0))
        os.chmod({db!r}, 0o444)
        with open_store({db!r}, owner=False) as r:
            print([w.id for w in r.list_workflows()])
        print(os.path.exists({db!r} + "-shm"))
        os.chmod({db!r}, 0o644)
        with open_store({db!r}) as s:
            s.create_workflow(__import__("persistence").NewWorkflow(
                id="b", type="m:w", continuation=b"c", fingerprint="f", created_at=2.0))
            print([w.id for w in s.list_workflows()])
    """, shared_dir)
    assert out.split("\n")[:3] == ["['a']", "False", "['a', 'b']"]


def test_owner_makes_a_read_only_shm_left_by_a_reader_writable(shared_dir: pathlib.Path) -> None:
    """A read-only -shm file a reader left (SQLite gives it the file's mode) is made writable by
    the owner of the same user, and named when it is another user's."""
    db = str(shared_dir / "wf.db")
    out = _as_other_user(f"""
        import os
        from persistence import ReadOnlyDatabase, open_store
        open_store({db!r}).close()
        with open({db!r} + "-shm", "wb") as f:
            f.write(bytes(32768))
        os.chmod({db!r} + "-shm", 0o444)
        with open_store({db!r}) as s:
            s.create_workflow(__import__("persistence").NewWorkflow(
                id="a", type="m:w", continuation=b"c", fingerprint="f", created_at=1.0))
        print(oct(os.stat({db!r} + "-shm").st_mode & 0o777) if os.path.exists({db!r} + "-shm") else "gone")
    """, shared_dir)
    assert out.strip() in ("0o644", "gone")
    if os.geteuid() != 0:
        return  # a -shm of another user needs a second user to make
    shm = shared_dir / "wf.db-shm"
    shm.write_bytes(bytes(32768))
    os.chmod(shm, 0o444)  # root's, not the owner's
    out = _as_other_user(f"""
        from persistence import ReadOnlyDatabase, open_store
        try:
            open_store({db!r}).close()
        except ReadOnlyDatabase as e:
            print(e)
    """, shared_dir)
    assert f"{shm} is read-only" in out and "a reader opened the file while it was read-only" in out
