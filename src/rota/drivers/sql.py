"""SQLDriver: the engine's storage written once over the dialect seam. Jobs, leases,
leadership, queue holds, durable steps and the inbox are named queries; what a dialect
still does its own way (its notifier, how it runs a migration file) its subclass adds."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from rota.drivers.base import (
    BacklogReport,
    DurationReport,
    HoldSource,
    JobFilter,
    QueueHold,
    QueueReport,
)
from rota.drivers.catalog import CatalogStore
from rota.drivers.database import Database
from rota.drivers.rows import job_from_row
from rota.errors import InvalidTransitionError, JobNotFoundError
from rota.job import Job


class SQLDriver:
    """The engine's storage on one Database. Thread-safe; every method blocks."""

    dialect: str

    def __init__(self, database: Database[Any]) -> None:
        self._database = database
        self.dialect = database.dialect
        self.url = database.url
        self.catalog = CatalogStore(database)

    @property
    def database(self) -> Database[Any]:
        return self._database

    def close(self) -> None:
        self._database.close()

    # --- schema and clock -----------------------------------------------------------------

    def schema_version(self) -> int:
        with self._database.read() as session:
            if not session.value("schema_has_table"):
                return 0
            return int(session.value("schema_version") or 0)

    def db_now(self) -> datetime:
        with self._database.read() as session:
            return self._database.codec.instant(session.value("db_now"))

    # --- jobs -----------------------------------------------------------------------------

    def job_get(self, job_id: int) -> Job | None:
        rows = self._database.query("job_get", {"id": job_id})
        return job_from_row(rows[0], self._database.codec) if rows else None

    def job_list(self, where: JobFilter) -> list[Job]:
        c = self._database.codec
        params = {
            "states": c.array([str(s) for s in where.states]),
            "queue": where.queue,
            "task": where.task,
            "before_id": where.before_id,
            "limit": where.limit,
        }
        return [job_from_row(r, c) for r in self._database.query("job_list", params)]

    def _job_change(self, name: str, job_id: int, verb: str) -> Job:
        with self._database.write() as session:
            row = session.one(name, {"id": job_id})
            current = None if row is not None else session.one("job_get", {"id": job_id})
        if row is not None:
            return job_from_row(row, self._database.codec)
        if current is None:
            raise JobNotFoundError(f"no job with id {job_id}")
        raise InvalidTransitionError(f"job {job_id} is {current['state']}: it cannot be {verb}")

    def job_cancel(self, job_id: int) -> Job:
        return self._job_change("job_cancel", job_id, "cancelled")

    def job_retry(self, job_id: int) -> Job:
        return self._job_change("job_retry", job_id, "retried")

    def job_checkpoint(self, job_id: int, lease_token: str, value_json: str) -> bool:
        params = {"id": job_id, "token": lease_token, "value": value_json}
        return bool(self._database.execute("job_checkpoint", params))

    def job_prune(self, state: str, age: float, limit: int) -> int:
        """Delete up to `limit` jobs of one finished state older than `age` seconds."""
        params = {"state": state, "age": age, "limit": limit}
        with self._database.write() as session:
            return session.count("job_prune_finished", params)

    def job_prune_finished(self, completed_age: float, discarded_age: float, limit: int) -> int:
        # Cancelled jobs share the completed retention here; the pruner sets each apart.
        ages = {"completed": completed_age, "cancelled": completed_age, "discarded": discarded_age}
        return sum(self.job_prune(state, age, limit) for state, age in ages.items())

    # --- durable steps, the inbox and the application's transactions ----------------------

    def step_list(self, job_id: int) -> dict[str, Any]:
        c = self._database.codec
        rows = self._database.query("step_list", {"job_id": job_id})
        return {r["name"]: c.json(r["result"]) for r in rows}

    def step_record(self, job_id: int, lease_token: str, name: str, result_json: str) -> bool:
        params = {"job_id": job_id, "token": lease_token, "name": name, "result": result_json}
        return bool(self._database.execute("step_record", params))

    def inbox_record(self, conn: object, source: str, message_id: str) -> bool:
        params = {"source": source, "message_id": message_id}
        return bool(self._database.execute("inbox_record", params, conn))

    def inbox_prune(self, age: float, limit: int) -> int:
        with self._database.write() as session:
            return session.count("inbox_prune", {"age": age, "limit": limit})

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        with self._database.transaction() as conn:
            yield conn

    # --- leadership -----------------------------------------------------------------------

    def leader_attempt_elect(self, name: str, leader: str, ttl_seconds: float) -> bool:
        params = {"name": name, "leader": leader, "ttl": ttl_seconds}
        return bool(self._database.execute("leader_attempt_elect", params))

    def leader_resign(self, name: str, leader: str) -> None:
        self._database.execute("leader_resign", {"name": name, "leader": leader})

    # --- queues ---------------------------------------------------------------------------

    def queue_list(self) -> list[QueueReport]:
        db = self._database
        counts: dict[str, dict[str, int]] = {}
        with db.read() as session:
            for row in session.all("queue_counts"):
                counts.setdefault(row["queue"], {})[row["state"]] = int(row["n"])
            oldest = {r["queue"]: float(r["age"]) for r in session.all("queue_oldest")}
            paused = {r["name"]: db.codec.flag(r["paused"]) for r in session.all("queue_settings")}
        names = sorted(set(counts) | set(paused))
        return [
            QueueReport(n, paused.get(n, False), counts.get(n, {}), oldest.get(n)) for n in names
        ]

    def queue_set_paused(self, name: str, paused: bool) -> None:
        self._database.execute("queue_set_paused", {"name": name, "paused": paused})

    def queue_backlog(self, queue: str) -> BacklogReport:
        row = self._database.query("queue_backlog", {"queue": queue})[0]
        return BacklogReport(
            queue, int(row["backlog"]), int(row["running"]), max(0.0, float(row["oldest_age_s"]))
        )

    def queue_durations(self, queue: str, window: float) -> DurationReport:
        row = self._database.query("queue_durations", {"queue": queue, "window": window})[0]
        mean = row["mean_s"]
        return DurationReport(
            queue, window, int(row["samples"]), None if mean is None else float(mean)
        )

    def _hold_change(self, name: str, params: dict[str, Any]) -> tuple[bool, bool]:
        """Apply one hold change; (paused before, paused after). The queue's row is
        created or locked first, so changes of its holds take turns."""
        flag = self._database.codec.flag
        with self._database.write() as session:
            before = flag(session.value("hold_lock_queue", params))
            session.count("hold_adopt", params)
            session.count(name, params)
            after = flag(session.value("hold_sync", params))
        return before, after

    def queue_hold_put(
        self, queue: str, source: HoldSource, reason: str, until: datetime | None
    ) -> bool:
        """Add or update one source's hold on a queue; True when that paused the queue
        (it had none). The queue starts nothing while it has any hold."""
        until_param = self._database.codec.time_param(until)
        params = {"queue": queue, "source": source, "reason": reason, "until": until_param}
        before, after = self._hold_change("hold_put", params)
        return after and not before

    def queue_hold_drop(self, queue: str, source: HoldSource) -> bool:
        """Remove one source's hold; True when that resumed the queue (no hold is left)."""
        before, after = self._hold_change("hold_drop", {"queue": queue, "source": source})
        return before and not after

    def queue_hold_list(self, queue: str | None = None) -> list[QueueHold]:
        c = self._database.codec
        return [
            QueueHold(
                queue=r["queue"],
                source=r["source"],
                reason=r["reason"],
                since=c.instant(r["since"]),
                until=c.time(r["until"]),
            )
            for r in self._database.query("hold_list", {"queue": queue})
        ]
