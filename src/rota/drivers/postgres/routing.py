"""Routing storage on PostgreSQL: worker advertisements and unroutable jobs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rota.drivers import queries
from rota.routing.model import Unroutable, WorkerAdvert

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver

_Q = queries.load("postgres")


class PostgresRoutingStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def worker_advertise(
        self, worker_id: str, queues: Sequence[str], capabilities: Sequence[str], ttl: float
    ) -> None:
        params = {"id": worker_id, "queues": list(queues), "caps": list(capabilities), "ttl": ttl}
        with self._d._tx() as cur:
            cur.execute(_Q["worker_prune_expired"])
            cur.execute(_Q["worker_advertise"], params)

    def worker_list(self) -> list[WorkerAdvert]:
        return [
            WorkerAdvert(
                worker_id=r["id"],
                queues=tuple(r["queues"]),
                capabilities=tuple(r["capabilities"]),
                started_at=r["started_at"],
                seen_at=r["seen_at"],
                expires_at=r["expires_at"],
            )
            for r in self._d._rows("worker_list_live")
        ]

    def worker_retire(self, worker_id: str) -> None:
        self._d._rows("worker_retire", {"id": worker_id})

    def job_unroutable(self, queue: str | None, limit: int) -> list[Unroutable]:
        rows = self._d._rows("job_list_unroutable", {"queue": queue, "limit": limit})
        return [
            Unroutable(
                queue=r["queue"],
                requires=tuple(r["requires"]),
                waiting=r["waiting"],
                oldest_job_id=r["oldest_job_id"],
                oldest_created_at=r["oldest_created_at"],
            )
            for r in rows
        ]
