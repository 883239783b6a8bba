"""Routing by required resources on both dialects: the claim honours a worker's
capabilities (real in-process workers), unroutable jobs are reported, labels validated."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from rota.routing.store import RoutingStore
from rota.worker.fetcher import claim_now
from tests.helpers import fast_settings, run_worker_until, wait_for


def _caps_worker(app: rota.App, *caps: str, queues: dict[str, int] | None = None) -> rota.Worker:
    return rota.Worker(app, fast_settings(queues=queues or {"ml": 2}, capabilities=frozenset(caps)))


def test_a_gpu_job_waits_for_a_gpu_worker_and_shows_as_unroutable(app: rota.App) -> None:
    ran: list[tuple[str, str]] = []

    @app.task(queue="ml", requires={"gpu"})
    def train(ctx: rota.Context, model: str) -> None:
        ran.append((model, ctx.worker_id))

    @app.task(queue="ml")
    def tidy(ctx: rota.Context) -> None:
        ran.append(("tidy", ctx.worker_id))

    gpu_job = train.enqueue(model="m1")
    assert gpu_job.requires == ("gpu",)
    tidy.enqueue()
    plain = _caps_worker(app)
    asyncio.run(run_worker_until(plain, lambda: len(ran) == 1))
    assert ran == [("tidy", plain.id)]  # the plain worker ran what it could, nothing else
    assert app.get_job(gpu_job.id).state is rota.JobState.AVAILABLE
    (stuck,) = app.routing.unroutable()
    assert (stuck.queue, stuck.requires, stuck.waiting, stuck.oldest_job_id) == (
        "ml",
        ("gpu",),
        1,
        gpu_job.id,
    )
    assert app.routing.workers() == []  # plain workers do not advertise

    gpu = _caps_worker(app, "gpu", "mem:large")
    seen: dict[str, object] = {}

    def done() -> bool:
        if not seen:
            adverts = app.routing.workers()
            if adverts:
                seen["workers"] = adverts
        return len(ran) == 2 and bool(seen)

    asyncio.run(run_worker_until(gpu, done))
    assert ran[1] == ("m1", gpu.id)
    (advert,) = seen["workers"]  # type: ignore[misc]
    assert (advert.worker_id, advert.queues, advert.capabilities) == (
        gpu.id,
        ("ml",),
        ("gpu", "mem:large"),
    )
    assert app.routing.workers() == []  # retired on a clean stop
    assert app.routing.unroutable() == []


def test_a_job_needs_all_its_labels_and_enqueue_overrides_the_task(app: rota.App) -> None:
    @app.task(queue="ml", requires={"gpu"})
    def train() -> None:
        pass

    both = train.enqueue(requires={"mem:large", "gpu"})
    anywhere = train.enqueue(requires=set())
    assert both.requires == ("gpu", "mem:large") and anywhere.requires == ()
    assert [j.id for j in claim_now(app, "ml", 10, "w1", 30, ())] == [anywhere.id]
    assert claim_now(app, "ml", 10, "w2", 30, ("gpu",)) == []
    assert claim_now(app, "ml", 10, "w3", 30, ("mem:large",)) == []
    (claimed,) = claim_now(app, "ml", 10, "w4", 30, ("gpu", "mem:large", "ssd"))
    assert claimed.id == both.id and claimed.requires == ("gpu", "mem:large")


def test_without_capabilities_the_claim_is_unfiltered_for_drain(app: rota.App) -> None:
    @app.task(queue="ml", requires={"tpu"})
    def train() -> None:
        pass

    job = train.enqueue()
    (claimed,) = claim_now(app, "ml", 10, "drain", 30)
    assert claimed.id == job.id


def test_unroutable_counts_only_live_workers_of_the_jobs_queue(app: rota.App) -> None:
    @app.task(queue="ml", requires={"gpu"})
    def train() -> None:
        pass

    @app.task(queue="ml", requires={"gpu", "tpu"})
    def huge() -> None:
        pass

    train.enqueue_many([{}, {}])
    first_huge = huge.enqueue()
    routing = RoutingStore(app.driver)
    # A gpu worker that serves another queue does not help jobs of "ml".
    routing.worker_advertise("other", ["default"], ["gpu", "tpu"], 30)
    assert {(u.requires, u.waiting) for u in app.routing.unroutable()} == {
        (("gpu",), 2),
        (("gpu", "tpu"), 1),
    }
    routing.worker_advertise("g1", ["ml", "default"], ["gpu"], 30)
    (left,) = app.routing.unroutable("ml")
    assert (left.requires, left.oldest_job_id) == (("gpu", "tpu"), first_huge.id)
    assert app.routing.unroutable("default") == []
    routing.worker_advertise("g1", ["ml"], ["gpu"], 0.01)  # its advertisement lapses
    wait_for(lambda: len(app.routing.unroutable()) == 2, timeout=5)
    assert [w.worker_id for w in app.routing.workers()] == ["other"]
    routing.worker_retire("other")
    assert app.routing.workers() == []


def test_labels_are_validated_before_anything_is_written(app: rota.App) -> None:
    with pytest.raises(rota.TaskDefinitionError, match="set of labels"):
        app.task(requires="gpu")  # type: ignore[arg-type]
    with pytest.raises(rota.TaskDefinitionError, match="lower-case"):
        app.task(requires={"GPU"})

    @app.task(queue="ml")
    def train() -> None:
        pass

    for bad in ({"gpu node"}, {""}, {"x" * 64}, {1}, "gpu", {f"l{i}" for i in range(40)}):
        with pytest.raises(rota.ArgumentsError):
            train.enqueue(requires=bad)  # type: ignore[arg-type]
    # An option applies to the whole call: it is checked once, before any item.
    with pytest.raises(rota.ArgumentsError, match="requires") as refused:
        train.enqueue_many([{}], requires={"-gpu"})
    assert "item" not in str(refused.value)
    assert app.list_jobs(queue="ml") == []
    with pytest.raises(rota.ConfigurationError, match="capabilities"):
        rota.WorkerSettings(capabilities=frozenset({"Gpu"}))
    with pytest.raises(rota.ArgumentsError):
        app.routing.unroutable(limit=0)
    assert rota.WorkerSettings(capabilities={"gpu", "gpu"}).capabilities == {"gpu"}  # type: ignore[arg-type]


def test_cli_unroutable_and_worker_capability_flag(app: rota.App, database_url: str) -> None:
    @app.task(queue="ml", requires={"gpu"})
    def train() -> None:
        pass

    job = train.enqueue()
    runner = CliRunner()
    env = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None, "ROTA_API_TOKEN": None}
    result = runner.invoke(cli, ["queues", "unroutable", "--json"], env=env)
    assert result.exit_code == 3, result.output
    body = json.loads(result.output)
    assert body["unroutable"][0]["oldest_job_id"] == job.id and body["workers"] == []
    text = runner.invoke(cli, ["queues", "unroutable"], env=env)
    assert text.exit_code == 3 and "gpu" in text.output
    bad = runner.invoke(cli, ["worker", "--app", "x:y", "--capability", "GPU"], env=env)
    assert bad.exit_code == 2 and "lower-case" in bad.output
    RoutingStore(app.driver).worker_advertise("g1", ["ml"], ["gpu"], 30)
    ok = runner.invoke(cli, ["queues", "unroutable"], env=env)
    assert ok.exit_code == 0 and "no unroutable jobs" in ok.output and "g1" in ok.output


def test_routed_and_plain_workers_share_a_queue(app: rota.App) -> None:
    lock = threading.Lock()
    ran: dict[int, str] = {}

    @app.task(queue="ml")
    def work(ctx: rota.Context, n: int) -> None:
        with lock:
            ran[n] = ctx.worker_id

    jobs = [work.enqueue(n=n, requires={"gpu"} if n % 2 else None) for n in range(20)]
    plain = _caps_worker(app)
    gpu = _caps_worker(app, "gpu")

    async def both() -> None:
        tasks = [asyncio.create_task(w.run()) for w in (plain, gpu)]
        try:
            await asyncio.to_thread(wait_for, lambda: len(ran) == len(jobs), 15)
        finally:
            for w in (plain, gpu):
                w.stop()
            await asyncio.gather(*tasks)

    asyncio.run(both())
    assert all(ran[n] == gpu.id for n in range(1, 20, 2))  # gpu jobs only on the gpu worker
