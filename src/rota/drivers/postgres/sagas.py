"""Saga storage on PostgreSQL: row locks with FOR UPDATE, history as a jsonb array."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.drivers.base import SagaChange, SagaRecord, SagaStatus, StalledSaga
from rota.job import JobState

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver

_Q = queries.load("postgres")


def _at(value: Any) -> Any:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def _saga(row: dict[str, Any]) -> SagaRecord:
    return SagaRecord(
        id=row["id"],
        key=row["key"],
        name=row["name"],
        status=SagaStatus(row["status"]),
        step=row["step"],
        version=row["version"],
        job_id=row["job_id"],
        plan=row["plan"],
        data=row["data"],
        error=row["error"],
        history=tuple({**e, "at": _at(e.get("at"))} for e in row["history"]),
        deadline_at=row["deadline_at"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
    )


class PostgresSagaStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def _one(self, conn: Any, name: str, params: dict[str, Any]) -> dict[str, Any] | None:
        with self._d._tx(conn) as cur:
            cur.execute(_Q[name], params)
            row: dict[str, Any] | None = cur.fetchone()
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
        rows = self._d._rows("saga_get", {"key": key})
        return _saga(rows[0]) if rows else None

    def get_id(self, saga_id: int) -> SagaRecord | None:
        rows = self._d._rows("saga_get_id", {"id": saga_id})
        return _saga(rows[0]) if rows else None

    def search(
        self, status: str | None, name: str | None, limit: int, before_id: int | None
    ) -> list[SagaRecord]:
        params = {"status": status, "name": name, "limit": limit, "before_id": before_id}
        return [_saga(r) for r in self._d._rows("saga_list", params)]

    def prune(self, age: float, limit: int) -> int:
        return len(self._d._rows("saga_prune", {"age": age, "limit": limit}))

    def stalled(self, limit: int) -> list[StalledSaga]:
        return [
            StalledSaga(
                saga_id=r["id"],
                version=r["version"],
                job_id=r["job_id"],
                job_state=None if r["job_state"] is None else JobState(r["job_state"]),
                overdue=bool(r["overdue"]),
            )
            for r in self._d._rows("saga_stalled", {"limit": limit})
        ]
