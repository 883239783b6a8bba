"""Presence on SQLite: every worker sharing the file runs on this host, so each holds an
flock on a file of its own next to the database (`<db>-presence/`). The kernel drops the
lock the moment the process dies; a sweep that can take a worker's lock knows it is gone."""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import socket
from collections.abc import Iterator

from rota.drivers.presence import PresenceStore, PresenceTakenError
from rota.drivers.sqlite.database import SQLiteDatabase


class FileHold:
    """The flock of one worker on its presence file, held while the process lives."""

    def __init__(self, fd: int, path: str) -> None:
        self._fd: int | None = fd
        self._path = path

    def alive(self) -> bool:
        return self._fd is not None  # nothing outside this process can take it away

    def close(self) -> None:
        if self._fd is None:
            return
        # Unlinked while still locked: a sweep that opens the path then finds no file,
        # which it reads as gone, as it should once we let go.
        with contextlib.suppress(OSError):
            _unlink_if_same(self._fd, self._path)
        os.close(self._fd)
        self._fd = None


class SQLitePresence(PresenceStore):
    grace = 0.0  # an flock ends only with its process: no live worker loses it

    def __init__(self, database: SQLiteDatabase) -> None:
        super().__init__(database)
        self._sqlite = database
        self.folder = os.path.abspath(database.path) + "-presence"

    def path(self, worker: str) -> str:
        digest = hashlib.sha256(worker.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        return os.path.join(self.folder, f"{digest}.lock")

    def _hold(self, worker: str, host: str, pid: int, server_options: str) -> FileHold:
        os.makedirs(self.folder, exist_ok=True)
        path = self.path(worker)
        fd = _lock(path)
        try:
            os.ftruncate(fd, 0)
            os.write(fd, f"{worker}\n{host}\n{pid}\n".encode("utf-8", "surrogatepass"))
            self._database.execute(
                "presence_register", {"worker": worker, "host": host, "pid": pid}
            )
        except BaseException:
            os.close(fd)
            raise
        return FileHold(fd, path)

    @contextlib.contextmanager
    def _suspects(self) -> Iterator[list[str] | None]:
        here = socket.gethostname()
        dead: list[str] = []
        held: list[tuple[int, str]] = []
        try:
            rows = self._database.query("presence_list")
            for row in rows:
                if row["host"] != here:
                    continue  # not ours to judge (a worker elsewhere keeps its lease)
                path = self.path(row["worker"])
                try:
                    fd = os.open(path, os.O_RDWR)
                except FileNotFoundError:
                    dead.append(row["worker"])  # its owner let go and removed it
                    continue
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)  # held: the worker lives
                    continue
                held.append((fd, path))
                dead.append(row["worker"])
            self.present = len(rows) - len(dead)
            yield dead
        finally:
            for fd, path in held:
                # Still holding it, so no owner can be using this file: remove it.
                with contextlib.suppress(OSError):
                    _unlink_if_same(fd, path)
                os.close(fd)


def _lock(path: str) -> int:
    """Open and flock `path`, making sure the locked file is the one at `path` (a sweep
    may have unlinked it between our open and our lock)."""
    for _ in range(100):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise PresenceTakenError(
                f"the presence file {path} is locked by another process: another live "
                "worker may use the same --worker-id (or a sweep is checking it; retried)"
            ) from None
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)
    raise PresenceTakenError(f"could not lock the presence file {path}")


def _unlink_if_same(fd: int, path: str) -> None:
    if os.fstat(fd).st_ino == os.stat(path).st_ino:
        os.unlink(path)
