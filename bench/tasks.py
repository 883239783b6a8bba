"""The tasks the benchmark runs. Every process (the parent that enqueues, the worker
children) builds its own App with `make_app`, so the names always agree."""

from __future__ import annotations

import time
from collections.abc import Callable

import rota

QUEUE = "bench"
NOOP_ASYNC = "bench.noop_async"
NOOP_SYNC = "bench.noop_sync"
STAMP = "bench.stamp"

# Where `bench.stamp` reports (seq, time.monotonic() at start); the latency child sets it.
stamp_sink: Callable[[int, float], None] | None = None


def make_app(url: str) -> rota.App:
    """An App on `url` with the benchmark's three tasks, all on the `bench` queue."""
    app = rota.App(url)

    @app.task(name=NOOP_ASYNC, queue=QUEUE)
    async def noop_async(n: int = 0) -> None:
        return None

    @app.task(name=NOOP_SYNC, queue=QUEUE)
    def noop_sync(n: int = 0) -> None:
        return None

    @app.task(name=STAMP, queue=QUEUE)
    async def stamp(seq: int) -> None:
        # CLOCK_MONOTONIC is system-wide on Linux: comparable with the enqueuing process.
        started = time.monotonic()
        if stamp_sink is not None:
            stamp_sink(seq, started)

    return app
