"""The tasks of the e2e and CLI tests. Each run appends a line to `<box>/runs.jsonl`
(job, attempt, pid, monotonic time) so a test sees which process ran what, when, how often.

`e2e_app` registers them on the workers' app; tests call `register()` on their own App to
enqueue and inspect the same tasks (the names are explicit, so they match)."""

from __future__ import annotations

import asyncio
import gc
import json
import os
import time
from pathlib import Path

import rota

RUNS_FILE = "runs.jsonl"


def record(box: str, event: str, ctx: rota.Context) -> None:
    """Append one event; O_APPEND writes of one short line do not interleave."""
    line = json.dumps(
        {
            "event": event,
            "job": ctx.job.id,
            "attempt": ctx.attempt,
            "pid": os.getpid(),
            "worker": ctx.worker_id,
            "t": time.monotonic_ns(),
        }
    )
    fd = os.open(Path(box) / RUNS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def register(app: rota.App) -> None:
    """Register the test tasks on `app`."""

    @app.task(name="hold", max_attempts=5)
    def hold(ctx: rota.Context, box: str, release: str) -> str:
        """Block, ignoring cancellation (like a stuck call), until `release` exists."""
        record(box, "start", ctx)
        while not os.path.exists(release):
            time.sleep(0.02)
        record(box, "end", ctx)
        return "done"

    @app.task(name="hold_async", max_attempts=5)
    async def hold_async(ctx: rota.Context, box: str, release: str) -> str:
        """The async twin of `hold` (cancellable at each await)."""
        record(box, "start", ctx)
        while not os.path.exists(release):
            await asyncio.sleep(0.02)
        record(box, "end", ctx)
        return "done"

    @app.task(name="stop_on_cancel", max_attempts=5)
    def stop_on_cancel(ctx: rota.Context, box: str, release: str) -> str:
        """Cooperative: waits for `release`, but gives up with an error once told to stop."""
        record(box, "start", ctx)
        while not os.path.exists(release):
            if ctx.wait_cancelled(0.02):
                raise RuntimeError(f"interrupted ({ctx.cancel_reason})")
        record(box, "end", ctx)
        return "done"

    @app.task(name="stop_on_cancel_async", max_attempts=5)
    async def stop_on_cancel_async(ctx: rota.Context, box: str, release: str) -> str:
        """Turns its cancellation into an error of its own, as some client libraries do."""
        record(box, "start", ctx)
        try:
            while not os.path.exists(release):
                await asyncio.sleep(0.02)
        except asyncio.CancelledError:
            raise RuntimeError(f"interrupted ({ctx.cancel_reason})") from None
        record(box, "end", ctx)
        return "done"

    @app.task(name="nap", max_attempts=3)
    def nap(ctx: rota.Context, box: str, seconds: float) -> float:
        """Take `seconds`, then finish."""
        record(box, "start", ctx)
        time.sleep(seconds)
        record(box, "end", ctx)
        return seconds

    @app.task(name="hang", timeout=0.5, max_attempts=1)
    def hang(ctx: rota.Context, box: str) -> None:
        """Past its timeout and deaf to cancellation: its thread never returns."""
        record(box, "start", ctx)
        time.sleep(3600)

    @app.task(name="frozen", max_attempts=1)
    def frozen() -> int:
        """How many objects the worker's process froze out of the collector's walks."""
        return gc.get_freeze_count()

    @app.task(name="gc_threshold", max_attempts=1)
    def gc_threshold() -> int:
        """The worker process's first collection threshold (`--gc-threshold`)."""
        return gc.get_threshold()[0]

    @app.task(name="greet", queue="mail", max_attempts=2)
    def greet(name: str, times: int = 1) -> str:
        """A small task for the CLI tests (never run by them)."""
        return " ".join([f"hello {name}"] * times)
