"""One running system owns a database file: an exclusive flock on a sidecar lock file.

The OS drops a flock when its process dies, even by SIGKILL, so a crashed owner never leaves the
file locked. The lock file also says who holds it (pid, host, since), for the error a second
owner gets.
"""

from __future__ import annotations

import contextlib
import datetime
import errno
import fcntl
import json
import os
import socket

from persistence._errors import DatabaseLocked, PersistenceError, ReadOnlyDatabase


def lock_path(path: str) -> str:
    """Return the sidecar lock file of database ``path``."""
    return path + ".lock"


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
        self.info: dict[str, object] = {}
        self._created = False  # this acquire made the lock file (it did not exist before)

    def acquire(self) -> dict[str, object]:
        """Take the lock and record this process as the owner; return the owner record.

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
        self.info = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        }
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, json.dumps(self.info).encode(), 0)
        except OSError:
            # The record is informative only; the flock itself is the ownership.
            pass
        self._fd = fd
        return self.info

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
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


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
