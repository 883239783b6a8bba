"""Saga storage, written once over the dialect seam (SQL: drivers/<dialect>/queries/saga.sql):
the saga row, locked for each transition (FOR UPDATE on PostgreSQL; the caller's BEGIN
IMMEDIATE on SQLite), its history as a JSON array, and the records it exchanges."""

from __future__ import annotations

import enum
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rota.drivers.base import Driver
from rota.drivers.database import Row
from rota.drivers.rows import due_in
from rota.job import JobState


class SagaStatus(enum.StrEnum):
    RUNNING = "running"  # forward steps are executing
    COMPENSATING = "compensating"  # undoing the completed steps, newest first
    COMPLETED = "completed"  # every step succeeded
    COMPENSATED = "compensated"  # a step failed (or an abort) and every undo succeeded
    FAILED = "failed"  # an undo kept failing: a human must look

    @property
    def finished(self) -> bool:
        return self in (SagaStatus.COMPLETED, SagaStatus.COMPENSATED, SagaStatus.FAILED)


@dataclass(frozen=True)
class SagaRecord:
    """A stored saga: where it is (`status`, `step`), what it knows (`data`), and how
    it got there (`history`, oldest first, each entry with its database time `at`)."""

    id: int
    key: str
    name: str
    status: SagaStatus
    step: str | None
    version: int
    job_id: int | None
    plan: list[dict[str, Any]]
    data: dict[str, Any]
    error: str | None
    history: tuple[dict[str, Any], ...]
    deadline_at: datetime | None
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SagaChange:
    """One transition of a locked saga (the version goes up by one)."""

    saga_id: int
    status: SagaStatus
    step: str | None
    job_id: int | None
    data_json: str
    error: str | None
    entry_json: str  # the history entry; the store adds its time
    deadline: float | None = None  # seconds from now the new step may take in all


@dataclass(frozen=True)
class StalledSaga:
    """A saga in flight whose job ended without moving it on, or whose step is overdue."""

    saga_id: int
    version: int
    job_id: int | None
    job_state: JobState | None  # None: the job is gone (pruned)
    overdue: bool


class SagaStore:
    """Saga rows (rota.sagas). Methods taking `conn` join the caller's transaction;
    `lock` holds the row until it ends (FOR UPDATE; BEGIN IMMEDIATE on SQLite)."""

    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def _saga(self, row: Row) -> SagaRecord:
        c = self._db.codec
        return SagaRecord(
            id=row["id"],
            key=row["key"],
            name=row["name"],
            status=SagaStatus(row["status"]),
            step=row["step"],
            version=row["version"],
            job_id=row["job_id"],
            plan=c.json(row["plan"]),
            data=c.json(row["data"]),
            error=row["error"],
            history=tuple({**e, "at": c.json_time(e.get("at"))} for e in c.json(row["history"])),
            deadline_at=c.time(row["deadline_at"]),
            created_at=c.instant(row["created_at"]),
            updated_at=c.instant(row["updated_at"]),
        )

    def _one(self, conn: object, name: str, params: dict[str, Any]) -> Row | None:
        with self._db.write(conn) as session:
            return session.one(name, params)

    def insert(
        self,
        conn: object,
        *,
        key: str,
        name: str,
        step: str,
        plan_json: str,
        data_json: str,
        entry_json: str,
    ) -> SagaRecord | None:
        params = {
            "key": key,
            "name": name,
            "step": step,
            "plan": plan_json,
            "data": data_json,
            "entry": entry_json,
        }
        row = self._one(conn, "saga_insert", params)
        return None if row is None else self._saga(row)

    def set_job(
        self, conn: object, saga_id: int, job_id: int, deadline: float | None
    ) -> SagaRecord:
        params = {"id": saga_id, "job_id": job_id, "deadline": deadline}
        row = self._one(conn, "saga_set_job", params)
        assert row is not None, "saga_set_job on a saga inserted in this transaction"
        return self._saga(row)

    def lock(self, conn: object, saga_id: int) -> SagaRecord | None:
        row = self._one(conn, "saga_lock", {"id": saga_id})
        return None if row is None else self._saga(row)

    def try_lock(self, conn: object, saga_id: int) -> SagaRecord | None:
        row = self._one(conn, "saga_try_lock", {"id": saga_id})
        return None if row is None else self._saga(row)

    def lock_key(self, conn: object, key: str) -> SagaRecord | None:
        row = self._one(conn, "saga_lock_key", {"key": key})
        return None if row is None else self._saga(row)

    def job_state(self, conn: object, job_id: int) -> JobState | None:
        row = self._one(conn, "saga_job_lock", {"id": job_id})
        return None if row is None else JobState(row["state"])

    def update(self, conn: object, change: SagaChange) -> SagaRecord:
        params = {
            "id": change.saga_id,
            "status": str(change.status),
            "step": change.step,
            "job_id": change.job_id,
            "data": change.data_json,
            "error": change.error,
            "entry": change.entry_json,
            "deadline": change.deadline,
        }
        row = self._one(conn, "saga_update", params)
        assert row is not None, "saga_update on a locked saga"
        return self._saga(row)

    def get(self, key: str) -> SagaRecord | None:
        rows = self._db.query("saga_get", {"key": key})
        return self._saga(rows[0]) if rows else None

    def get_id(self, saga_id: int) -> SagaRecord | None:
        rows = self._db.query("saga_get_id", {"id": saga_id})
        return self._saga(rows[0]) if rows else None

    def search(
        self, status: str | None, name: str | None, limit: int, before_id: int | None
    ) -> list[SagaRecord]:
        params = {"status": status, "name": name, "limit": limit, "before_id": before_id}
        return [self._saga(r) for r in self._db.query("saga_list", params)]

    def prune(self, age: float, limit: int) -> int:
        """Delete up to `limit` sagas finished (completed, compensated) over `age` s ago."""
        return len(self._db.execute("saga_prune", {"age": age, "limit": limit}))

    def next_deadline(self) -> float | None:
        """Seconds until the earliest running saga's step deadline passes (negative when
        one has), or None when no running saga has one."""
        return due_in(self._db, "saga_next_deadline")

    def stalled(self, limit: int) -> list[StalledSaga]:
        """Sagas in flight whose job ended without moving them on, or that are overdue."""
        return [
            StalledSaga(
                saga_id=r["id"],
                version=r["version"],
                job_id=r["job_id"],
                job_state=None if r["job_state"] is None else JobState(r["job_state"]),
                overdue=bool(r["overdue"]),
            )
            for r in self._db.query("saga_stalled", {"limit": limit})
        ]
