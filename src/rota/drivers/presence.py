"""Presence (#17): a live worker holds a lock that ends with its process (an advisory lock
on a database session of its own on PostgreSQL, an flock'd file on SQLite), and a sweep
rescues the running jobs of workers whose lock nobody holds, without waiting for their
leases. Written once over the dialect seam; each dialect brings how a lock is held."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from rota.drivers.base import RescueReport
from rota.drivers.database import Database
from rota.errors import ConfigurationError


class PresenceTakenError(ConfigurationError):
    """Another live process holds this worker id's presence: two workers share an id."""


class PresenceHold(Protocol):
    """What keeps one worker present while its process lives."""

    def alive(self) -> bool:
        """False once the lock is gone (its session ended): the worker must not claim
        until it registers again. Cheap: no round trip while all is well."""
        ...

    def close(self) -> None:
        """Let go of the lock (a clean stop, or before registering again)."""
        ...


@dataclass(frozen=True)
class PresenceRecord:
    """One registered worker: `held` says whether its lock is held now (None: only a
    process on its host can tell, on SQLite); `lost_at` when it was first seen gone."""

    worker: str
    host: str
    pid: int
    session: int | None
    started_at: datetime
    lost_at: datetime | None
    held: bool | None

    def to_json(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "host": self.host,
            "pid": self.pid,
            "session": self.session,
            "started_at": self.started_at.isoformat(),
            "lost_at": None if self.lost_at is None else self.lost_at.isoformat(),
            "held": self.held,
        }


class PresenceStore:
    """Registration, the sweep and the rescue, over one Database. Thread-safe."""

    # Seconds a worker must stay gone before its jobs are rescued: long enough for a live
    # worker whose session alone was cut to register again (PostgreSQL); a dialect whose
    # lock can only end with the process needs none.
    grace: float = 0.0
    # Seconds after the database server started during which nobody is rescued as gone:
    # a restart ends every session at once, and the workers take a moment to come back.
    settle: float = 0.0

    def __init__(self, database: Database[Any]) -> None:
        self._database = database
        # Workers present at the last sweep (the sweeps' pace scales with it).
        self.present = 0

    # --- the worker's side ------------------------------------------------------------

    def hold(self, worker: str, server_options: str = "") -> PresenceHold:
        """Take `worker`'s lock and record it as present, the lock first: a sweep never
        sees the row without its lock. `server_options` are session settings for the
        server's side of a presence session (`-c tcp_keepalives_idle=...`: how soon the
        server notices a worker gone silent). Raises PresenceTakenError when a live
        process holds it (two workers with one id), DatabaseUnavailableError when the
        database cannot be reached."""
        return self._hold(worker, socket.gethostname(), os.getpid(), server_options)

    def leave(self, worker: str) -> None:
        """Remove `worker`'s row (a clean stop: nothing of it is left to rescue)."""
        self._database.execute("presence_leave", {"worker": worker})

    # --- every worker's sweep ---------------------------------------------------------

    def sweep(
        self, grace: float | None = None, limit: int = 1000, settle: float | None = None
    ) -> RescueReport:
        """Rescue the running jobs of workers gone for `grace` seconds, unless the server
        started less than `settle` seconds ago (defaults: the dialect's), then forget
        those workers once none of their jobs runs."""
        wait = self.grace if grace is None else grace
        with self._suspects() as dead:
            if dead is not None and not dead:
                return RescueReport()  # nobody to check in SQL: no statement at all
            params = {
                "grace": wait,
                "settle": self.settle if settle is None else settle,
                "dead": self._database.codec.array(dead or []),
            }
            gone = []
            for row in self._database.execute("presence_sweep", params):
                if row["worker"] is None:
                    self.present = int(row["present"])
                else:
                    gone.append(str(row["worker"]))
            if not gone:
                return RescueReport()
            report = self.rescue(gone, limit)
            self._database.execute("presence_forget", self._workers(gone))
            return report

    def rescue(self, workers: Sequence[str], limit: int = 1000) -> RescueReport:
        """Rescue the running jobs claimed by `workers` now: their processes are gone."""
        if not workers:
            return RescueReport()
        params = {**self._workers(workers), "limit": limit}
        states = [r["state"] for r in self._database.execute("job_rescue_orphaned", params)]
        return RescueReport(
            rescued=states.count("available"),
            discarded=states.count("discarded"),
            cancelled=states.count("cancelled"),
        )

    def records(self) -> list[PresenceRecord]:
        c = self._database.codec
        return [
            PresenceRecord(
                worker=r["worker"],
                host=r["host"],
                pid=int(r["pid"]),
                session=None if r["session"] is None else int(r["session"]),
                started_at=c.instant(r["started_at"]),
                lost_at=c.time(r["lost_at"]),
                held=None if r["held"] is None else c.flag(r["held"]),
            )
            for r in self._database.query("presence_list")
        ]

    # --- what a dialect brings --------------------------------------------------------

    def _hold(self, worker: str, host: str, pid: int, server_options: str) -> PresenceHold:
        raise NotImplementedError

    @contextlib.contextmanager
    def _suspects(self) -> Iterator[list[str] | None]:
        """The workers found gone by trying their locks, held while the sweep rescues
        them; None when the sweep's SQL finds them itself (PostgreSQL)."""
        yield None

    def _workers(self, workers: Sequence[str]) -> dict[str, Any]:
        return {"workers": self._database.codec.array(list(workers))}
