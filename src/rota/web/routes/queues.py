"""Queues: depth and age, throughput series for the charts, pause and resume."""

from __future__ import annotations

from rota.auth import Permission
from rota.job import JobState
from rota.standard import App
from rota.web.api import Api, Call
from rota.web.models import NamePath, PausedOut, QueueOut, SeriesOut, SeriesQuery
from rota.web.store import WebStore

WAITING = (JobState.AVAILABLE, JobState.SCHEDULED, JobState.RETRYABLE)


def register(api: Api) -> None:
    api.tags["queues"] = "Queue depth, throughput, pause and resume."

    @api.route(
        "GET",
        "/api/queues",
        permission=Permission.READ,
        summary="List queues",
        tag="queues",
        response=QueueOut,
        many=True,
    )
    def list_queues(call: Call) -> list[QueueOut]:
        """Every queue with jobs or settings: counts per state, depth, running jobs, the
        age of the oldest available job and whether it is paused."""
        return [
            QueueOut(
                name=r.name,
                paused=r.paused,
                counts=r.counts,
                depth=sum(r.counts.get(s, 0) for s in WAITING),
                running=r.counts.get(JobState.RUNNING, 0),
                oldest_available_age_s=r.oldest_available_age,
            )
            for r in call.app.list_queues()
        ]

    @api.route(
        "GET",
        "/api/queues/series",
        permission=Permission.READ,
        summary="Throughput series",
        tag="queues",
        query=SeriesQuery,
        response=SeriesOut,
    )
    def queue_series(call: Call) -> SeriesOut:
        """Jobs enqueued, completed, discarded and cancelled per queue and time bucket,
        computed from the jobs table (what the overview's charts draw)."""
        q: SeriesQuery = call.query
        size = max(1, -(-q.window // q.bucket))
        series: dict[str, dict[str, list[int]]] = {}
        for point in WebStore(call.app.driver).queue_series(float(q.window), float(q.bucket)):
            if 0 <= point.bucket < size:
                kinds = series.setdefault(point.queue, {})
                kinds.setdefault(point.kind, [0] * size)[point.bucket] += point.count
        return SeriesOut(window=q.window, bucket=q.bucket, series=series)

    @api.route(
        "POST",
        "/api/queues/{name}/pause",
        permission=Permission.OPERATE,
        summary="Pause a queue",
        tag="queues",
        path_model=NamePath,
        response=PausedOut,
    )
    def pause_queue(call: Call) -> PausedOut:
        """Stop starting jobs from the queue (running ones finish; survives restarts)."""
        call.app.pause_queue(call.path.name)
        return _held(call.app, call.path.name)

    @api.route(
        "POST",
        "/api/queues/{name}/resume",
        permission=Permission.OPERATE,
        summary="Resume a queue",
        tag="queues",
        path_model=NamePath,
        response=PausedOut,
    )
    def resume_queue(call: Call) -> PausedOut:
        """Start jobs from the queue again."""
        call.app.resume_queue(call.path.name)
        return _held(call.app, call.path.name)


def _held(app: App, name: str) -> PausedOut:
    """The queue's pause state after a change: paused while any hold remains."""
    sources = sorted(str(h.source) for h in app.queues.holds(name))
    return PausedOut(name=name, paused=bool(sources), held_by=sources)
