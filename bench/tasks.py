"""The tasks the benchmark runs. Every process (the parent that enqueues, the worker
children) builds its own App with `make_app`, so the names always agree."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable

import rota

QUEUE = "bench"
NOOP_ASYNC = "bench.noop_async"
NOOP_SYNC = "bench.noop_sync"
STAMP = "bench.stamp"
# Fails at once and for good: a dead letter (the `lived_dead` size history).
FAIL_ONCE = "bench.fail_once"

# Where `bench.stamp` reports (seq, time.monotonic() at start): in a `rota worker` of the
# latency measurement, a Unix datagram socket named by $ROTA_BENCH_STAMPS (bench/cli_app.py).
stamp_sink: Callable[[int, float], None] | None = None
STAMPS_ENV = "ROTA_BENCH_STAMPS"


def socket_sink() -> Callable[[int, float], None] | None:
    """A stamp sink sending `seq started` to the socket in $ROTA_BENCH_STAMPS, if set."""
    path = os.environ.get(STAMPS_ENV)
    if not path:
        return None
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)

    def send(seq: int, started: float) -> None:
        sock.sendto(f"{seq} {started!r}".encode(), path)

    return send


def make_app(url: str) -> rota.App:
    """An App on `url` with the benchmark's tasks, all on the `bench` queue."""
    app = rota.App(url)

    @app.task(name=NOOP_ASYNC, queue=QUEUE)
    async def noop_async(n: int = 0) -> None:
        return None

    @app.task(name=NOOP_SYNC, queue=QUEUE)
    def noop_sync(n: int = 0) -> None:
        return None

    @app.task(name=FAIL_ONCE, queue=QUEUE, max_attempts=1)
    async def fail_once(n: int = 0) -> None:
        raise RuntimeError(f"order {n}: the card was declined")

    @app.task(name=STAMP, queue=QUEUE)
    async def stamp(seq: int) -> None:
        # CLOCK_MONOTONIC is system-wide on Linux: comparable with the enqueuing process.
        started = time.monotonic()
        if stamp_sink is not None:
            stamp_sink(seq, started)

    return app
