"""Routing storage, written once over the dialect seam: worker advertisements and the
waiting jobs no live worker can run (SQL: drivers/<dialect>/queries/routing.sql)."""

from __future__ import annotations

from collections.abc import Sequence

from rota.drivers.base import Driver
from rota.routing.model import Unroutable, WorkerAdvert


class RoutingStore:
    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def worker_advertise(
        self, worker_id: str, queues: Sequence[str], capabilities: Sequence[str], ttl: float
    ) -> None:
        """Record (or renew) a worker's capabilities for `ttl` seconds."""
        array = self._db.codec.array
        params = {
            "id": worker_id,
            "queues": array(list(queues)),
            "caps": array(sorted(capabilities)),
            "ttl": ttl,
        }
        with self._db.write() as session:
            session.count("worker_prune_expired")
            session.count("worker_advertise", params)

    def worker_list(self) -> list[WorkerAdvert]:
        """Workers whose advertisement has not expired."""
        c = self._db.codec
        return [
            WorkerAdvert(
                worker_id=r["id"],
                queues=tuple(c.json(r["queues"])),
                capabilities=tuple(c.json(r["capabilities"])),
                started_at=c.instant(r["started_at"]),
                seen_at=c.instant(r["seen_at"]),
                expires_at=c.instant(r["expires_at"]),
            )
            for r in self._db.query("worker_list_live")
        ]

    def worker_retire(self, worker_id: str) -> None:
        """Forget a stopping worker's advertisement at once."""
        self._db.execute("worker_retire", {"id": worker_id})

    def job_unroutable(self, queue: str | None, limit: int) -> list[Unroutable]:
        """Waiting jobs with requirements that no live worker of their queue covers,
        grouped by queue and requirements."""
        c = self._db.codec
        return [
            Unroutable(
                queue=r["queue"],
                requires=tuple(c.json(r["requires"])),
                waiting=r["waiting"],
                oldest_job_id=r["oldest_job_id"],
                oldest_created_at=c.instant(r["oldest_created_at"]),
            )
            for r in self._db.query("job_list_unroutable", {"queue": queue, "limit": limit})
        ]
