"""Dashboard and HTTP API reads on PostgreSQL: job search, throughput series, workers,
leaders."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rota.job import Job
from rota.web.records import JobSearch, LeaderRecord, SeriesPoint, WorkerSeen

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver


class PostgresWebStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def job_search(self, where: JobSearch) -> list[Job]:
        from rota.drivers.postgres.driver import job_from_row

        params = {
            "q": where.q,
            "q_id": where.q_id,
            "id": where.id,
            "key": where.key,
            "task": where.task,
            "queue": where.queue,
            "states": list(where.states),
            "text": where.text,
            "before_id": where.before_id,
            "limit": where.limit,
        }
        return [job_from_row(r) for r in self._d._rows("web_job_search", params)]

    def queue_series(self, window: float, bucket: float) -> list[SeriesPoint]:
        rows = self._d._rows("web_queue_series", {"window": window, "bucket": bucket})
        return [SeriesPoint(r["queue"], r["kind"], int(r["bucket"]), int(r["n"])) for r in rows]

    def worker_list(self, window: float) -> list[WorkerSeen]:
        return [
            WorkerSeen(
                worker=r["worker"],
                running=int(r["running"] or 0),
                queues=tuple(sorted(set((r["queues"] or "").split(",")) - {""})),
                last_seen=r["last_seen"],
            )
            for r in self._d._rows("web_worker_list", {"window": window})
        ]

    def leader_list(self) -> list[LeaderRecord]:
        return [
            LeaderRecord(
                name=r["name"],
                leader=r["leader"],
                elected_at=r["elected_at"],
                expires_at=r["expires_at"],
                live=bool(r["live"]),
            )
            for r in self._d._rows("web_leader_list")
        ]
