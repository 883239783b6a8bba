"""Routing storage on SQLite: worker advertisements and unroutable jobs."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rota.drivers import queries
from rota.routing.model import Unroutable, WorkerAdvert

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


def _time(value: float) -> datetime:
    return datetime.fromtimestamp(value, UTC)


class SQLiteRoutingStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def worker_advertise(
        self, worker_id: str, queues: Sequence[str], capabilities: Sequence[str], ttl: float
    ) -> None:
        params = {
            "id": worker_id,
            "queues": json.dumps(list(queues)),
            "caps": json.dumps(sorted(capabilities)),
            "ttl": ttl,
        }
        with self._d._write() as db:
            db.execute(_Q["worker_prune_expired"])
            db.execute(_Q["worker_advertise"], params)

    def worker_list(self) -> list[WorkerAdvert]:
        return [
            WorkerAdvert(
                worker_id=r["id"],
                queues=tuple(json.loads(r["queues"])),
                capabilities=tuple(json.loads(r["capabilities"])),
                started_at=_time(r["started_at"]),
                seen_at=_time(r["seen_at"]),
                expires_at=_time(r["expires_at"]),
            )
            for r in self._d._read("worker_list_live")
        ]

    def worker_retire(self, worker_id: str) -> None:
        with self._d._write() as db:
            db.execute(_Q["worker_retire"], {"id": worker_id})

    def job_unroutable(self, queue: str | None, limit: int) -> list[Unroutable]:
        rows = self._d._read("job_list_unroutable", {"queue": queue, "limit": limit})
        return [
            Unroutable(
                queue=r["queue"],
                requires=tuple(json.loads(r["requires"])),
                waiting=r["waiting"],
                oldest_job_id=r["oldest_job_id"],
                oldest_created_at=_time(r["oldest_created_at"]),
            )
            for r in rows
        ]
