"""Queue limits across real worker processes: a global concurrency limit of 3 over four
`rota worker` processes, sampled from the database, on both dialects; and a rate limit
never exceeded in any second by two processes (PostgreSQL only, to keep CI short).
How close the rate comes to its limit is measured in bench/, not asserted here."""

from __future__ import annotations

from datetime import timedelta

import pytest

import rota
from tests.e2e.test_worker_processes import Spawn, spawn, until  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e
APP = ["--app", "ops_app:app"]


def running(app: rota.App, queue: str) -> int:
    return next((q.counts.get("running", 0) for q in app.list_queues() if q.name == queue), 0)


def test_global_limit_of_three_holds_across_four_worker_processes(
    app: rota.App,
    database_url: str,
    spawn: Spawn,  # noqa: F811
) -> None:
    app.queues.configure("limited", global_limit=3)
    workers = [spawn(database_url, *APP, queues="limited=3") for _ in range(4)]
    for worker in workers:  # all four compete from the first job (start-up times vary)
        worker.wait_logged("started: queues", timeout=60)
    jobs = app.driver.job_insert_many(
        [
            rota.drivers.base.JobInsert("ops.hold", "limited", '{"seconds": 0.15}', 0, 3)
            for _ in range(40)
        ]
    )
    samples: list[int] = []

    def all_done() -> bool:
        samples.append(running(app, "limited"))
        return all((j := app.get_job(job.id)) is not None and j.state.finished for job in jobs)

    until(all_done, *workers, timeout=60)
    assert max(samples) <= 3, samples
    assert samples.count(3) >= 3  # the limit was reached, not just respected
    finished = [app.get_job(j.id) for j in jobs]
    assert {j.state for j in finished if j} == {rota.JobState.COMPLETED}
    assert len({j.worker for j in finished if j}) >= 2  # the work was shared
    # Run-time change, no restart: lift the limit and more run at once.
    app.queues.configure("limited", global_limit=None)
    more = app.driver.job_insert_many(
        [
            rota.drivers.base.JobInsert("ops.hold", "limited", '{"seconds": 0.5}', 0, 3)
            for _ in range(12)
        ]
    )
    until(lambda: running(app, "limited") > 3, *workers, timeout=30)
    until(
        lambda: all((j := app.get_job(m.id)) is not None and j.state.finished for m in more),
        *workers,
        timeout=30,
    )


def test_rate_limit_is_never_exceeded_in_any_second_by_two_processes(
    pg_url: str,
    spawn: Spawn,  # noqa: F811
) -> None:
    app = rota.App(pg_url)
    app.migrate()
    try:
        app.queues.configure("paced", rate=(10, 1.0))
        app.driver.job_insert_many(
            [rota.drivers.base.JobInsert("ops.tick", "paced", "{}", 0, 3) for _ in range(400)]
        )
        workers = [
            spawn(pg_url, *APP, "--poll-interval", "0.05", queues="paced=20") for _ in range(2)
        ]

        def started() -> list[rota.Job]:
            return [
                j for j in app.list_jobs(queue="paced", limit=10_000) if j.attempted_at is not None
            ]

        # A hundred starts: ten seconds of the limit, claimed by both processes at once.
        until(lambda: len(started()) >= 100, *workers, timeout=120)
        times = sorted(j.attempted_at for j in started() if j.attempted_at is not None)
        for i, t in enumerate(times):  # never more than 10 in any one second (DB clock)
            assert len([u for u in times[i : i + 12] if u < t + timedelta(seconds=1)]) <= 10
        span = (times[-1] - times[0]).total_seconds()
        assert len(times) <= 10 * (span + 1)
    finally:
        app.close()
