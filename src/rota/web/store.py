"""Reads behind the HTTP API and the dashboard, written once over the dialect seam (SQL:
drivers/<dialect>/queries/web.sql): job search, throughput series, workers, leaders."""

from __future__ import annotations

from rota.drivers.base import Driver
from rota.drivers.rows import job_from_row
from rota.job import Job
from rota.web.records import JobSearch, LeaderRecord, SeriesPoint, WorkerSeen


class WebStore:
    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def job_search(self, where: JobSearch) -> list[Job]:
        c = self._db.codec
        params = {
            "q": where.q,
            "q_id": where.q_id,
            "id": where.id,
            "key": where.key,
            "task": where.task,
            "queue": where.queue,
            "tenant": where.tenant,
            "states": c.array(list(where.states)),
            "text": where.text,
            "before_id": where.before_id,
            "limit": where.limit,
            "args": where.args,
            "scan": where.scan,
        }
        # Two statements, so that each keeps one plan that uses the indexes (#23): `q` is
        # looked up by id, key, task and text; the filters alone list by state.
        name = "web_job_search" if where.q is not None else "web_job_list"
        return [job_from_row(r, c) for r in self._db.query(name, params)]

    def queue_series(self, window: float, bucket: float) -> list[SeriesPoint]:
        rows = self._db.query("web_queue_series", {"window": window, "bucket": bucket})
        return [SeriesPoint(r["queue"], r["kind"], int(r["bucket"]), int(r["n"])) for r in rows]

    def worker_list(self, window: float) -> list[WorkerSeen]:
        c = self._db.codec
        return [
            WorkerSeen(
                worker=r["worker"],
                running=int(r["running"] or 0),
                queues=tuple(sorted(set((r["queues"] or "").split(",")) - {""})),
                last_seen=c.instant(r["last_seen"]),
            )
            for r in self._db.query("web_worker_list", {"window": window})
        ]

    def leader_list(self) -> list[LeaderRecord]:
        c = self._db.codec
        return [
            LeaderRecord(
                name=r["name"],
                leader=r["leader"],
                elected_at=c.instant(r["elected_at"]),
                expires_at=c.instant(r["expires_at"]),
                live=c.flag(r["live"]),
            )
            for r in self._db.query("web_leader_list")
        ]
