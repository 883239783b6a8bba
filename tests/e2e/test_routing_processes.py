"""Routing across real worker processes: `rota worker --processes 2 --capability gpu`
passes the capability to both children, which advertise it and alone run the GPU jobs,
while a plain worker process takes only the others."""

from __future__ import annotations

import pytest

import rota
import rota.routing.model
from tests.e2e.test_worker_processes import Spawn, spawn, until  # noqa: F401  (fixture)

pytestmark = pytest.mark.e2e
APP = ["--app", "routing_app:app"]


def test_gpu_jobs_run_only_on_the_gpu_worker_processes(
    app: rota.App,
    database_url: str,
    spawn: Spawn,  # noqa: F811
) -> None:
    insert = rota.drivers.base.JobInsert
    gpu_jobs = app.driver.job_insert_many(
        [insert("route.train", "ml", "{}", 0, 3, requires=("gpu",)) for _ in range(20)]
    )
    plain_jobs = app.driver.job_insert_many(
        [insert("route.tidy", "ml", "{}", 0, 3) for _ in range(20)]
    )
    plain = spawn(database_url, *APP, queues="ml=2")
    until(
        lambda: all(app.get_job(j.id).state.finished for j in plain_jobs),  # type: ignore[union-attr]
        plain,
        timeout=60,
    )
    assert all(app.get_job(j.id).state is rota.JobState.AVAILABLE for j in gpu_jobs)  # type: ignore[union-attr]
    assert len(app.routing.unroutable()) == 1
    gpu = spawn(database_url, *APP, "--processes", "2", "--capability", "gpu", queues="ml=2")

    def both_children_advertise() -> list[rota.routing.model.WorkerAdvert] | None:
        adverts = app.routing.workers()
        return adverts if len(adverts) == 2 else None

    adverts = until(both_children_advertise, gpu, plain, timeout=60)
    assert all(a.capabilities == ("gpu",) and a.queues == ("ml",) for a in adverts)
    until(
        lambda: all(app.get_job(j.id).state.finished for j in gpu_jobs),  # type: ignore[union-attr]
        gpu,
        plain,
        timeout=60,
    )
    workers = {app.get_job(j.id).worker for j in gpu_jobs}  # type: ignore[union-attr]
    assert workers <= {a.worker_id for a in adverts}
    assert app.routing.unroutable() == []
