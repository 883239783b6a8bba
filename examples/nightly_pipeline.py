"""The nightly pipeline as a workflow: extract the day's orders, process them in 20
parallel shards, send one receipt per customer (a dynamic fan-out over what the shards
found), and write a summary once every receipt is out (a fan-in).

    python -m examples.nightly_pipeline          # SQLite, in a temporary directory
    ROTA_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \
        python -m examples.nightly_pipeline      # PostgreSQL

In production the same workflow starts from cron (`app.schedule_workflow` below): each
03:00 tick starts one run, keyed by the tick, however many schedulers see it.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
import zlib
from typing import Any

import rota

app = rota.App(
    os.environ.get("ROTA_DATABASE_URL")
    or f"sqlite:///{tempfile.mkdtemp(prefix='rota-example-')}/nightly.db"
)

CUSTOMERS = [f"customer-{n:03d}" for n in range(1, 38)]  # 37 customers
SHARDS = 20


def _shard(customer: str) -> int:
    return zlib.crc32(customer.encode()) % SHARDS  # stable across processes (unlike hash())


@app.task
def extract(day: str) -> dict[str, Any]:
    """Pretend to load the day's orders: 5 orders for every customer."""
    orders = [
        {"customer": c, "cents": 100 + (i * 37 + n * 11) % 900}
        for i, c in enumerate(CUSTOMERS)
        for n in range(5)
    ]
    return {"day": day, "orders": len(orders), "customers": len(CUSTOMERS)}


@app.task
def process(ctx: rota.Context, day: str) -> list[dict[str, Any]]:
    """Shard `index` of 20: total the orders of the customers that hash to it."""
    step = ctx.workflow
    assert step is not None
    mine = [c for c in CUSTOMERS if _shard(c) == step.index]
    return [
        {
            "customer": c,
            "cents": sum(100 + (CUSTOMERS.index(c) * 37 + n * 11) % 900 for n in range(5)),
        }
        for c in mine
    ]


@app.task(queue="mail", max_attempts=10)
def send_receipt(customer: dict[str, Any], day: str) -> dict[str, Any]:
    """One job per customer (the element of the fan-out arrives as `customer`)."""
    return {"customer": customer["customer"], "cents": customer["cents"], "sent": day}


@app.task
def summarize(send_receipt: list[dict[str, Any]], extract: dict[str, Any]) -> dict[str, Any]:
    """The fan-in: every receipt's result, in order, as one argument."""
    return {
        "receipts": len(send_receipt),
        "customers": extract["customers"],
        "revenue_cents": sum(r["cents"] for r in send_receipt),
    }


nightly = rota.Workflow("nightly")
extracted = nightly.step(extract)
processed = nightly.step(process, after=extracted, fan_out=SHARDS)
receipts = nightly.step(send_receipt, after=processed, each="customer", max_attempts=5)
nightly.step(summarize, after=[receipts, extracted])

# Every night at 03:00 Berlin time, a run keyed by the tick.
app.schedule_workflow(nightly, "0 3 * * *", tz="Europe/Berlin", args={"day": "yesterday"})


async def run_until_finished(run_id: int, timeout: float = 60.0) -> None:
    worker = rota.Worker(
        app,
        rota.WorkerSettings(
            queues={"default": 20, "mail": 10},
            poll_interval=0.2,
            workflow_interval=0.1,
            grace=5.0,
        ),
    )
    task = asyncio.create_task(worker.run())
    deadline = time.monotonic() + timeout
    try:
        while not (await asyncio.to_thread(app.workflows.get, run_id)).state.finished:
            if task.done() or time.monotonic() > deadline:
                raise SystemExit(f"workflow {run_id} did not finish within {timeout}s")
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await task


def main() -> None:
    app.migrate()
    day = "2026-11-29"
    run = app.workflows.start(nightly, args={"day": day}, key=f"nightly-{day}")
    again = app.workflows.start(nightly, args={"day": day}, key=f"nightly-{day}")
    print(f"started workflow {run.id} ({run.key}); starting it again returned {again.id}")

    started = time.monotonic()
    asyncio.run(run_until_finished(run.id))
    done = app.workflows.get(run.id)
    print(f"workflow {done.id} {done.state} in {time.monotonic() - started:.1f}s")
    for step in done.steps:
        print(f"  {step.name:<13} {step.state:<10} {step.total} job(s)")
    summary = done.results["summarize"]
    print(
        f"summary: {summary['receipts']} receipts for {summary['customers']} customers, "
        f"revenue {summary['revenue_cents'] / 100:.2f}"
    )
    app.close()


if __name__ == "__main__":
    main()
