"""One running system owns a database file: an exclusive flock on the file itself.

The flock is on the database file, so every path to it (a symbolic link, a hard link) meets the
same lock; a sidecar lock file beside the file's real path (symbolic links resolved) says who holds
it (pid, host, since), for the error a second owner gets, and is flocked too. The OS drops a flock
when its process dies, even by SIGKILL, so a crashed owner never leaves the file locked.

Closing any descriptor of a file drops every POSIX lock the process holds on it, SQLite's own
among them (the locks of this process's other connections to that file). So the descriptor of a
database file is closed only when no other descriptor of this process refers to the file; until
then it is kept, unlocked, and reused by the next lock of the same file.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket
import threading

from persistence._errors import DatabaseLocked, PersistenceError, ReadOnlyDatabase


def lock_path(path: str) -> str:
    """Return the sidecar lock file of database ``path`` (beside its real path, links resolved)."""
    return os.path.realpath(path) + ".lock"


# Descriptors of database files, unlocked, that could not be closed yet (see the module's
# docstring), by the file's (device, inode); and who holds the lock of each file this process
# owns, for the error of a second owner that comes in through another path.
_kept: dict[tuple[int, int], list[int]] = {}
_held: dict[tuple[int, int], dict[str, object]] = {}
_fds_lock = threading.Lock()


def _shared_with_others(key: tuple[int, int], ours: list[int]) -> bool:
    """True if a descriptor of this process other than ``ours`` refers to the file ``key`` (or
    if it cannot be told: the descriptors are then kept, which is safe)."""
    for where in ("/proc/self/fd", "/dev/fd"):
        try:
            names = os.listdir(where)
        except OSError:
            continue
        for name in names:
            if not name.isdigit() or int(name) in ours:
                continue
            try:
                st = os.fstat(int(name))
            except OSError:
                continue  # the descriptor of the listing itself, closed by now
            if (st.st_dev, st.st_ino) == key:
                return True
        return False
    return True


def _keep(key: tuple[int, int], fd: int) -> None:
    """Give back an unlocked descriptor of a database file: closed now if nothing else of this
    process has the file open, else kept (with ``_fds_lock`` held)."""
    _kept.setdefault(key, []).append(fd)
    for k, fds in list(_kept.items()):
        if not _shared_with_others(k, fds):
            del _kept[k]
            for f in fds:
                os.close(f)


def _open_database(path: str) -> tuple[int, tuple[int, int], bool]:
    """Open (creating it if missing) the database file to lock it: (fd, identity, created)."""
    created = False
    with contextlib.suppress(OSError), _fds_lock:
        st = os.stat(path)
        key = (st.st_dev, st.st_ino)
        fds = _kept.get(key)
        if fds:
            fd = fds.pop()
            if not fds:
                del _kept[key]
            return fd, key, created  # kept unlocked, and reused: opening another is not needed
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        created = True
    st = os.fstat(fd)
    key = (st.st_dev, st.st_ino)
    return fd, key, created


def _flock_holder(key: tuple[int, int]) -> dict[str, object]:
    """The process holding the flock of the file ``key``, from ``/proc/locks`` ({} if unknown).

    The owner record of the lock file cannot be used: a hard link has a lock file of its own.
    """
    dev, ino = key
    wanted = f"{os.major(dev):02x}:{os.minor(dev):02x}:{ino}"
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as f:
            for line in f:
                fields = line.split()
                # "1: FLOCK  ADVISORY  WRITE 4242 08:01:123 0 EOF" (a waiter's line has "->")
                if len(fields) >= 6 and fields[1] == "FLOCK" and fields[5] == wanted:
                    return {"pid": int(fields[4]), "host": socket.gethostname()}
    except (OSError, ValueError):
        pass
    return {}


def _open_lock_file(path: str, flags: int) -> int:
    try:
        return os.open(lock_path(path), flags | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EPERM) and os.path.exists(lock_path(path)):
            # The lock file is there (another user's, say) but this user may not open it.
            try:
                owner = f"owned by uid {os.stat(lock_path(path)).st_uid}, "
            except OSError:
                owner = ""
            raise ReadOnlyDatabase(
                f"cannot open the lock file {lock_path(path)} ({exc.strerror}): it exists, "
                f"{owner}and this user (uid {os.getuid()}) may not write it. Run as the user "
                f"who owns the database, make the lock file writable for this one, or open the "
                f"file with owner=False to read it.",
                path=path,
            ) from exc
        if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
            raise ReadOnlyDatabase(
                f"cannot create the lock file {lock_path(path)} next to {path} ({exc.strerror}); "
                f"the directory is read-only. Put the database in a writable directory, or open "
                f"it with owner=False to read it.",
                path=path,
            ) from exc
        raise PersistenceError(
            f"cannot open the lock file {lock_path(path)} ({exc.strerror}); check that the "
            f"directory of {path} exists and is writable.",
            path=path,
        ) from exc


def _read_info(fd: int) -> dict[str, object]:
    try:
        raw = os.pread(fd, 4096, 0)
        info = json.loads(raw.decode() or "{}")
        return info if isinstance(info, dict) else {}
    except (OSError, ValueError):
        return {}


class OwnerLock:
    """The exclusive ownership of one database file, held until ``release``."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd: int | None = None
        self._db_fd: int | None = None
        self._key: tuple[int, int] | None = None
        self.info: dict[str, object] = {}
        self._created = False  # this acquire made the lock file (it did not exist before)
        self._created_db = False  # ... and the (empty) database file

    def acquire(self, node_id: str | None = None, started_at: float | None = None) -> dict[str, object]:
        """Take the lock and record this process as the owner (with the name and start time of
        its system, which `wf nodes` shows); return the owner record.

        Raises:
            DatabaseLocked: another process (or another store in this process) owns the file.
            ReadOnlyDatabase: the lock file cannot be created.
        """
        existed = os.path.exists(lock_path(self.path))
        fd = _open_lock_file(self.path, os.O_RDWR | os.O_CREAT)
        self._created = not existed
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            info = _read_info(fd)
            os.close(fd)
            raise DatabaseLocked(
                self.path,
                pid=info.get("pid"),  # type: ignore[arg-type]
                host=info.get("host"),  # type: ignore[arg-type]
                since=info.get("since"),  # type: ignore[arg-type]
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            self._lock_database()
        except BaseException:
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)
            if self._created:
                with contextlib.suppress(OSError):
                    os.unlink(lock_path(self.path))
            raise
        self.info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        if node_id is not None:
            self.info["node_id"] = node_id
        if started_at is not None:
            self.info["started_at"] = started_at
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(self.info).encode(), 0)
        except OSError:
            # The record is informative only; the flock itself is the ownership.
            pass
        self._fd = fd
        assert self._key is not None
        with _fds_lock:
            _held[self._key] = self.info
        return self.info

    def _lock_database(self) -> None:
        """Flock the database file itself: a second owner through a link meets this lock."""
        try:
            fd, key, created = _open_database(self.path)
        except OSError as exc:
            raise PersistenceError(
                f"cannot open {self.path} to lock it ({exc.strerror}); check that this user may "
                f"read it.",
                path=self.path,
            ) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            with _fds_lock:
                info = dict(_held.get(key) or {})
                _keep(key, fd)
            info = info or _flock_holder(key)
            raise DatabaseLocked(
                self.path,
                pid=info.get("pid"),  # type: ignore[arg-type]
                host=info.get("host"),  # type: ignore[arg-type]
                since=info.get("since"),  # type: ignore[arg-type]
                through_link=True,
            ) from None
        except BaseException:
            with _fds_lock:
                _keep(key, fd)
            raise
        self._db_fd, self._key, self._created_db = fd, key, created

    def release(self, *, remove: bool = False) -> None:
        """Give up the lock (idempotent). ``remove``: and delete the lock file, if this lock
        created it (the file turned out not to be an actorflow database: leave nothing beside it).
        """
        fd, self._fd = self._fd, None
        if fd is None:
            return
        if remove and self._created:
            with contextlib.suppress(OSError):
                os.unlink(lock_path(self.path))
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
        try:
            self._release_database()
        finally:
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

    def _release_database(self) -> None:
        db_fd, self._db_fd = self._db_fd, None
        if db_fd is None or self._key is None:
            return
        if self._created_db:
            # A file this lock created that nothing was written to (the open failed): leave
            # nothing behind.
            with contextlib.suppress(OSError):
                st = os.stat(self.path)
                if (st.st_dev, st.st_ino) == self._key and st.st_size == 0:
                    os.unlink(self.path)
        with _fds_lock:
            _held.pop(self._key, None)
            fcntl.flock(db_fd, fcntl.LOCK_UN)
            _keep(self._key, db_fd)


def current_owner(path: str) -> dict[str, object] | None:
    """Return the running owner's record (pid, host, since), or None if no system owns ``path``."""
    try:
        fd = os.open(lock_path(path), os.O_RDONLY | os.O_CLOEXEC)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_info(fd) or {"pid": None, "host": None, "since": None}
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)
