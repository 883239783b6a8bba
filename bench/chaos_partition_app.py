"""The tasks of the partition chaos run (bench/chaos_partition.py). Each records when it
starts, stops and applies its external effect in a file of its own process, on the wall
clock of this machine (the runner compares it with the database's, on the same machine)."""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path

import rota

app = rota.App()
_lock = threading.Lock()


def record(kind: str, ctx: rota.Context) -> None:
    line = {
        "kind": kind,
        "job": ctx.job.id,
        "attempt": ctx.attempt,
        "worker": ctx.worker_id,
        "t": time.time(),
    }
    path = Path(os.environ["CHAOS_EVENTS"]) / f"{os.getpid()}.jsonl"
    with _lock, path.open("a") as out:
        out.write(json.dumps(line) + "\n")


@app.task(max_attempts=50)
def work(ctx: rota.Context, seconds: float) -> None:
    """A sync task that honours cancellation between small steps of work."""
    record("start", ctx)
    ends = time.monotonic() + seconds
    while time.monotonic() < ends:
        if ctx.wait_cancelled(0.02):
            record("stopped", ctx)
            return
    record("effect", ctx)


@app.task(max_attempts=50)
async def work_async(ctx: rota.Context, seconds: float) -> None:
    """An async task: the worker cancels it (CancelledError) when it must stop."""
    record("start", ctx)
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        record("stopped", ctx)
        raise
    record("effect", ctx)
