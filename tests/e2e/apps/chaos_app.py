"""Tasks for the chaos test: each makes effects that must happen once per job although
its worker is killed with SIGKILL at random points."""

from __future__ import annotations

import os
import random
import time
from typing import Any

import rota

app = rota.App(os.environ.get("ROTA_DATABASE_URL", "sqlite:///chaos.db"))


def _mark() -> str:
    return "?" if app.driver.dialect == "sqlite" else "%s"


def _pause(top: float) -> None:
    time.sleep(random.uniform(0, top))


def log_call(job_id: int, what: str, attempt: int) -> None:
    """Every call is logged in its own committed transaction, even if the job dies after."""
    m = _mark()
    with app.transaction() as conn:
        conn.execute(f"INSERT INTO calls VALUES ({m}, {m}, {m})", (job_id, what, attempt))


def outside_api(key: str, job_id: int, what: str) -> None:
    """An outside service that deduplicates requests by idempotency key."""
    m = _mark()
    with app.transaction() as conn:
        conn.execute(
            f"INSERT INTO api VALUES ({m}, {m}, {m}) ON CONFLICT (key) DO NOTHING",
            (key, job_id, what),
        )


@app.task(queue="chaos", max_attempts=100)
def pay(ctx: rota.Context, n: int) -> None:
    """Writes its effect in ctx.transaction(): the effect and the completion are one commit."""
    _pause(0.05)
    m = _mark()
    with ctx.transaction() as conn:
        conn.execute(f"INSERT INTO effects VALUES ({m}, {m})", (ctx.job.id, n))
        _pause(0.05)  # a kill here rolls the effect back with the completion
    _pause(0.02)


@app.task(queue="chaos", max_attempts=100)
def stepped(ctx: rota.Context, n: int) -> None:
    """Three durable steps, each an outside call guarded by the step's idempotency key."""

    def call(name: str) -> str:
        log_call(ctx.job.id, name, ctx.attempt)
        _pause(0.02)
        outside_api(ctx.idempotency_key(name), ctx.job.id, name)
        _pause(0.02)  # a kill here repeats the call; the key makes it harmless
        return name

    for name in ("reserve", "charge", "ship"):
        ctx.step(name, call, name)
        _pause(0.05)


@app.task(queue="chaos", max_attempts=100)
def chunked(ctx: rota.Context, chunks: int) -> dict[str, Any]:
    """Processes chunks in order and checkpoints after each; a retry resumes."""
    start = ctx.last_checkpoint or 0
    for chunk in range(start, chunks):
        log_call(ctx.job.id, f"chunk-{chunk}", ctx.attempt)
        outside_api(f"{ctx.job.id}-chunk-{chunk}", ctx.job.id, f"chunk-{chunk}")
        ctx.checkpoint(chunk + 1)
        _pause(0.03)
    return {"resumed_from": start}
