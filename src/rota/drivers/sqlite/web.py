"""Dashboard and HTTP API reads on SQLite: job search, throughput series, workers, leaders."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rota.job import Job
from rota.web.records import JobSearch, LeaderRecord, SeriesPoint, WorkerSeen

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver


def _ts(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


class SQLiteWebStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def job_search(self, where: JobSearch) -> list[Job]:
        from rota.drivers.sqlite.driver import job_from_row

        params = {
            "q": where.q,
            "q_id": where.q_id,
            "id": where.id,
            "key": where.key,
            "task": where.task,
            "queue": where.queue,
            "states": json.dumps(list(where.states)),
            "text": where.text,
            "before_id": where.before_id,
            "limit": where.limit,
        }
        return [job_from_row(r) for r in self._d._read("web_job_search", params)]

    def queue_series(self, window: float, bucket: float) -> list[SeriesPoint]:
        rows = self._d._read("web_queue_series", {"window": window, "bucket": bucket})
        return [SeriesPoint(r["queue"], r["kind"], int(r["bucket"]), int(r["n"])) for r in rows]

    def worker_list(self, window: float) -> list[WorkerSeen]:
        rows = self._d._read("web_worker_list", {"window": window})
        return [
            WorkerSeen(
                worker=r["worker"],
                running=int(r["running"] or 0),
                queues=tuple(sorted(set((r["queues"] or "").split(",")) - {""})),
                last_seen=_ts(r["last_seen"]),
            )
            for r in rows
        ]

    def leader_list(self) -> list[LeaderRecord]:
        return [
            LeaderRecord(
                name=r["name"],
                leader=r["leader"],
                elected_at=datetime.fromtimestamp(r["elected_at"], UTC),
                expires_at=datetime.fromtimestamp(r["expires_at"], UTC),
                live=bool(r["live"]),
            )
            for r in self._d._read("web_leader_list")
        ]
