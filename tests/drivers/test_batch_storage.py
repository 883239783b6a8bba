"""Batch storage on both dialects: every controller write is fenced by the batch's version
(a stale pass writes nothing, not even its jobs), racing controllers never start an index
twice, and TTL pruning deletes a batch with its rows and finished jobs."""

from __future__ import annotations

import threading

import rota
import rota.testing
from rota.batches.service import BatchController
from rota.batches.store import BatchApply, BatchStore, ItemChange
from rota.drivers.base import JobInsert


def noop_task(app: rota.App) -> rota.Task[[], None]:
    @app.task(name="noop")
    def noop() -> None:
        pass

    return noop


def test_a_stale_pass_writes_nothing(app: rota.App) -> None:
    status = app.batch(noop_task(app), completions=3, parallelism=1)
    store = BatchStore(app.driver)
    record = store.get(status.id)
    assert record is not None and record.version == 1  # the creation's first pass
    stale = BatchApply(
        batch_id=status.id,
        version=record.version - 1,
        status={
            "succeeded": 9,
            "failed": 0,
            "ignored": 0,
            "fails_since_success": 0,
            "last_failure_at": None,
            "interim": None,
            "interim_reason": None,
            "interim_message": None,
            "condition": None,
            "reason": None,
            "message": None,
        },
        items=[ItemChange(1, "succeeded", 0, None, None)],
        start=[(2, JobInsert("noop", "default", "{}", 0, 1))],
    )
    assert store.apply(stale) is False
    after = store.get(status.id)
    assert after is not None and after.succeeded == 0 and after.version == record.version
    assert [i.state for i in store.items(status.id)] == ["active", "pending", "pending"]
    assert len(app.list_jobs()) == 1  # the stale pass's job was rolled back
    fresh = BatchApply(status.id, record.version, stale.status)
    assert store.apply(fresh) is True
    assert store.get(status.id).version == record.version + 1  # type: ignore[union-attr]


def test_racing_controllers_start_each_index_once(app: rota.App) -> None:
    noop = noop_task(app)
    status = app.batch(noop, completions=40, parallelism=40, suspend=True)
    app.batches.resume(status.id)
    controllers = [BatchController(app.driver, 1.0) for _ in range(4)]
    barrier = threading.Barrier(len(controllers))
    errors: list[BaseException] = []

    def run(controller: BatchController) -> None:
        try:
            barrier.wait()
            controller.run_once()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(c,)) for c in controllers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    for controller in controllers:  # whoever lost the race catches up
        controller.run_once()
    jobs = app.batches.jobs(status.id)
    indexes = sorted(j.meta["batch"]["index"] for j in jobs)
    assert indexes == list(range(40))


def test_ttl_prunes_the_batch_its_items_and_finished_jobs(app: rota.App) -> None:
    noop = noop_task(app)
    keep = app.batch(noop, completions=2, parallelism=2, name="keep")
    gone = app.batch(noop, completions=2, parallelism=2, ttl_after_finished=0, name="gone")
    rota.testing.drain(app)
    report = app.batches.advance()
    assert report.finished == 2 and report.pruned == 1
    assert app.batches.get("keep").condition == "Complete"
    assert BatchStore(app.driver).get("gone") is None
    assert BatchStore(app.driver).items(gone.id) == []
    assert BatchStore(app.driver).job_ids(gone.id) == []
    assert len(app.list_jobs()) == 2 and len(app.batches.jobs(keep.id)) == 2


def test_empty_batches_and_items_round_trip(app: rota.App) -> None:
    @app.task(name="echo")
    def echo(item: object) -> object:
        return item

    empty = app.batch(echo, items=[])
    assert (empty.condition, empty.reason, empty.completions) == (
        "Complete",
        "CompletionsReached",
        0,
    )
    odd = app.batch(echo, items=[None, 0, "x", [1, {"a": None}], {"item": {"b": 2}}], parallelism=5)
    rota.testing.drain(app)
    app.batches.advance()
    results = {j.meta["batch"]["index"]: j.result for j in app.batches.jobs(odd.id)}
    assert results == {0: None, 1: 0, 2: "x", 3: [1, {"a": None}], 4: {"b": 2}}


def test_counting_live_attempts_reads_only_the_live_indexes(app: rota.App, dialect: str) -> None:
    """Every read of a batch counts its active indexes: through a partial index, not by
    scanning the batch's finished ones (up to 100,000 rows per read and controller pass)."""
    status = app.batch(noop_task(app), completions=50, parallelism=2)
    query = "SELECT count(*) FROM rota_batch_items i WHERE i.batch_id = {0} AND i.state = 'active'"
    with app.transaction() as conn:
        if dialect == "sqlite":
            rows = conn.execute("EXPLAIN QUERY PLAN " + query.format("?"), (status.id,))
            plan = " ".join(str(tuple(r)) for r in rows)
        else:
            conn.execute("SET LOCAL enable_seqscan = off")  # a tiny table: ask for indexes
            rows = conn.execute("EXPLAIN " + query.format("%s"), (status.id,)).fetchall()
            plan = " ".join(str(r["QUERY PLAN"]) for r in rows)
    assert "rota_batch_items_active_idx" in plan, plan
