"""Saga storage on SQLite: the caller's BEGIN IMMEDIATE is the row lock, history is a
JSON array whose entries carry Unix-second times."""

from __future__ import annotations

import json
import sqlite3
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.drivers.base import SagaChange, SagaRecord, SagaStatus, StalledSaga
from rota.job import JobState

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _saga(row: sqlite3.Row) -> SagaRecord:
    return SagaRecord(
        id=row["id"],
        key=row["key"],
        name=row["name"],
        status=SagaStatus(row["status"]),
        step=row["step"],
        version=row["version"],
        job_id=row["job_id"],
        plan=json.loads(row["plan"]),
        data=json.loads(row["data"]),
        error=row["error"],
        history=tuple({**e, "at": _ts(e.get("at"))} for e in json.loads(row["history"])),
        deadline_at=_ts(row["deadline_at"]),
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
        updated_at=datetime.fromtimestamp(row["updated_at"], UTC),
    )


class SQLiteSagaStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def _one(self, conn: Any, name: str, params: dict[str, Any]) -> sqlite3.Row | None:
        with self._d._write(conn) as db:
            row: sqlite3.Row | None = db.execute(_Q[name], params).fetchone()
            return row

    def insert(
        self,
        conn: Any,
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
        return None if row is None else _saga(row)

    def set_job(self, conn: Any, saga_id: int, job_id: int, deadline: float | None) -> SagaRecord:
        params = {"id": saga_id, "job_id": job_id, "deadline": deadline}
        row = self._one(conn, "saga_set_job", params)
        assert row is not None, "saga_set_job on a saga inserted in this transaction"
        return _saga(row)

    def lock(self, conn: Any, saga_id: int) -> SagaRecord | None:
        row = self._one(conn, "saga_lock", {"id": saga_id})
        return None if row is None else _saga(row)

    def try_lock(self, conn: Any, saga_id: int) -> SagaRecord | None:
        row = self._one(conn, "saga_try_lock", {"id": saga_id})
        return None if row is None else _saga(row)

    def lock_key(self, conn: Any, key: str) -> SagaRecord | None:
        row = self._one(conn, "saga_lock_key", {"key": key})
        return None if row is None else _saga(row)

    def job_state(self, conn: Any, job_id: int) -> JobState | None:
        row = self._one(conn, "saga_job_lock", {"id": job_id})
        return None if row is None else JobState(row["state"])

    def update(self, conn: Any, change: SagaChange) -> SagaRecord:
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
        return _saga(row)

    def get(self, key: str) -> SagaRecord | None:
        rows = self._d._read("saga_get", {"key": key})
        return _saga(rows[0]) if rows else None

    def get_id(self, saga_id: int) -> SagaRecord | None:
        rows = self._d._read("saga_get_id", {"id": saga_id})
        return _saga(rows[0]) if rows else None

    def search(
        self, status: str | None, name: str | None, limit: int, before_id: int | None
    ) -> list[SagaRecord]:
        params = {"status": status, "name": name, "limit": limit, "before_id": before_id}
        return [_saga(r) for r in self._d._read("saga_list", params)]

    def prune(self, age: float, limit: int) -> int:
        with self._d._write() as db:
            return len(db.execute(_Q["saga_prune"], {"age": age, "limit": limit}).fetchall())

    def stalled(self, limit: int) -> list[StalledSaga]:
        return [
            StalledSaga(
                saga_id=r["id"],
                version=r["version"],
                job_id=r["job_id"],
                job_state=None if r["job_state"] is None else JobState(r["job_state"]),
                overdue=bool(r["overdue"]),
            )
            for r in self._d._read("saga_stalled", {"limit": limit})
        ]
