"""pgqueuer on PostgreSQL, measured the way rota is (docs/benchmarks.md#peers).

Run by the python of pgqueuer's own virtualenv (`.venv-bench/pgqueuer/`), never rota's:
`python pgqueuer_peer.py '<json spec>'`. It imports only the standard library, pgqueuer and
asyncpg, and prints one JSON line with the result. The benchmark creates the schema named in
the spec and drops it afterwards; this script installs pgqueuer's tables into it.

Settings: pgqueuer's documented benchmark configuration (its `tools/benchmark.py` and
benchmark docs): the asyncpg driver, uvloop, and `consumers` PgQueuer instances in one
process, each on its own connection, dequeuing `batch` jobs at a time (5 x 10 there).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import random
import sys
import time
from typing import Any

import asyncpg
import pgqueuer
import uvloop
from pgqueuer import PgQueuer, Queries
from pgqueuer.db import AsyncpgDriver
from pgqueuer.models import Job
from pgqueuer.types import QueueExecutionMode

ENTRYPOINT = "noop"
STAMP = "stamp"


async def connect(spec: dict[str, Any]) -> asyncpg.Connection:
    # The schema goes first on the search path: pgqueuer's tables, types and functions
    # are created in it and found there, so every measurement starts from nothing.
    return await asyncpg.connect(dsn=spec["url"], server_settings={"search_path": spec["schema"]})


async def install(spec: dict[str, Any]) -> None:
    conn = await connect(spec)
    try:
        await Queries(AsyncpgDriver(conn)).install()
    finally:
        await conn.close()


def payloads(start: int, stop: int) -> list[bytes | None]:
    # The same arguments rota's jobs carry ({"n": i}), as pgqueuer's bytes payload.
    return [json.dumps({"n": i}).encode() for i in range(start, stop)]


async def prefill(spec: dict[str, Any], jobs: int, batch: int = 1000) -> None:
    conn = await connect(spec)
    try:
        queries = Queries(AsyncpgDriver(conn))
        for start in range(0, jobs, batch):
            stop = min(start + batch, jobs)
            await queries.enqueue(
                [ENTRYPOINT] * (stop - start), payloads(start, stop), [0] * (stop - start)
            )
        # The same settled start as rota's drains (bench/db.py settle()).
        await conn.execute("VACUUM ANALYZE pgqueuer")
    finally:
        await conn.close()


async def drain(spec: dict[str, Any]) -> dict[str, Any]:
    """Drain `jobs` prefilled no-op jobs with `consumers` x `batch`; the window is read from
    pgqueuer's own log (first `picked` row to last `successful` row, the database's clock),
    as rota's is read from attempted_at and finished_at."""
    jobs = int(spec["jobs"])
    await prefill(spec, jobs)
    conns = [await connect(spec) for _ in range(int(spec["consumers"]))]
    done = 0

    async def noop(job: Job) -> None:
        nonlocal done
        json.loads(job.payload or b"{}")
        done += 1

    queuers = []
    for conn in conns:
        pgq = PgQueuer(AsyncpgDriver(conn))
        pgq.entrypoint(ENTRYPOINT)(noop)
        queuers.append(pgq)
    cpu = time.process_time()
    started = time.perf_counter()
    await asyncio.wait_for(
        asyncio.gather(
            *(
                pgq.run(batch_size=int(spec["batch"]), mode=QueueExecutionMode.drain)
                for pgq in queuers
            )
        ),
        timeout=float(spec.get("timeout", 300)),
    )
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    row = await conns[0].fetchrow(
        """
        SELECT extract(epoch FROM max(created) FILTER (WHERE status = 'successful')
                              - min(created) FILTER (WHERE status = 'picked')) AS elapsed,
               count(*) FILTER (WHERE status = 'successful') AS successful,
               (SELECT count(*) FROM pgqueuer) AS left_over
        FROM pgqueuer_log
        """
    )
    for conn in conns:
        await conn.close()
    if row["successful"] != jobs or row["left_over"] != 0:
        raise SystemExit(
            f"pgqueuer drain: {row['successful']} successful, {row['left_over']} left, "
            f"{done} ran, of {jobs}"
        )
    return {"elapsed": float(row["elapsed"]), "wall": wall, "cpu": cpu, "completed": jobs}


async def enqueue_single(spec: dict[str, Any]) -> dict[str, Any]:
    """`queries.enqueue(entrypoint, payload)` in a loop: one statement (one commit) each."""
    jobs = int(spec["jobs"])
    conn = await connect(spec)
    try:
        queries = Queries(AsyncpgDriver(conn))
        for i in range(10):  # warm up, as rota's loop does
            await queries.enqueue(ENTRYPOINT, json.dumps({"n": -i}).encode())
        started = time.perf_counter()
        for i in range(jobs):
            await queries.enqueue(ENTRYPOINT, json.dumps({"n": i}).encode())
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
    return {"rate": jobs / elapsed}


async def enqueue_bulk(spec: dict[str, Any]) -> dict[str, Any]:
    """`queries.enqueue([...], [...], [...])` with `batch` jobs per call."""
    jobs, batch = int(spec["jobs"]), int(spec["batch"])
    conn = await connect(spec)
    try:
        queries = Queries(AsyncpgDriver(conn))
        await queries.enqueue([ENTRYPOINT], [b'{"n": -1}'], [0])  # warm up
        calls = [(start, min(start + batch, jobs)) for start in range(0, jobs, batch)]
        started = time.perf_counter()
        for start, stop in calls:
            await queries.enqueue(
                [ENTRYPOINT] * (stop - start), payloads(start, stop), [0] * (stop - start)
            )
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
    return {"rate": jobs / elapsed}


# --- the raw baseline on asyncpg: bench/raw.py's loops on pgqueuer's driver ---------------
# rota's table and the raw loops' own SQL, sent here by the benchmark with asyncpg's `$n`
# placeholders (`raw.positional`): how much of each target the driver alone would give.


def noop(n: int = 0) -> None:
    return None


async def raw_insert(spec: dict[str, Any]) -> dict[str, Any]:
    """bench/raw.py's single insert, one per commit, on one asyncpg connection."""
    jobs = int(spec["jobs"])
    sql, names = spec["insert"], spec["insert_params"]
    conn = await connect(spec)

    async def insert(i: int) -> None:
        values = {"task": spec["task"], "queue": spec["queue"], "args": json.dumps({"n": i})}
        await conn.fetchrow(sql, *(values[name] for name in names))

    try:
        for i in range(-10, 0):  # warm up, as the psycopg loop does
            await insert(i)
        started = time.perf_counter()
        for i in range(jobs):
            await insert(i)
        elapsed = time.perf_counter() - started
    finally:
        await conn.close()
    return {"rate": jobs / elapsed}


async def raw_drain(spec: dict[str, Any]) -> dict[str, Any]:
    """bench/raw.py's drain on one asyncpg connection, over the jobs the benchmark put in
    rota's table: the lean loop (claim 100, run, complete the batch), or rota's own plain
    claim, which carries the last batch's completions."""
    params = {
        "queue": spec["queue"],
        "limit": int(spec["batch"]),
        "worker": f"raw-asyncpg-{random.randrange(16**6):06x}",
        "lease": float(spec["lease"]),
    }
    claim, names = spec["claim"], spec["claim_params"]
    conn = await connect(spec)
    done = batches = 0

    async def lean() -> None:
        nonlocal done, batches
        args = [params[name] for name in names]
        while rows := await conn.fetch(claim, *args):
            for row in rows:
                noop(**json.loads(row["args"]))
            ids, tokens = [r["id"] for r in rows], [r["lease_token"] for r in rows]
            await conn.execute(spec["complete"], ids, tokens)
            done += len(rows)
            batches += 1

    async def carrying() -> None:
        nonlocal done, batches
        carried: list[Any] = []
        while True:
            n = len(carried)
            step = {
                **params,
                **{name: [value] * n for name, value in spec["carried"].items()},
                "c_id": [r["id"] for r in carried],
                "c_token": [r["lease_token"] for r in carried],
            }
            found = await conn.fetch(claim, *(step[name] for name in names))
            done += n
            carried = [r for r in found if r["kind"] == "job"]
            if not carried:
                return
            for row in carried:
                noop(**json.loads(row["args"]))
            batches += 1

    try:
        cpu = time.process_time()
        started = time.perf_counter()
        await (lean() if spec["variant"] == "lean" else carrying())
        elapsed = time.perf_counter() - started
        cpu = time.process_time() - cpu
    finally:
        await conn.close()
    return {"elapsed": elapsed, "cpu": cpu, "completed": done, "batches": batches}


# --- enqueue-to-start latency, against an idle consumer in another process ---------------


def consumer_main(spec: dict[str, Any], stamps: Any, ready: Any, stop: Any) -> None:
    """A child process: one idle PgQueuer whose `stamp` entrypoint reports when it starts."""

    async def main() -> None:
        conn = await connect(spec)
        pgq = PgQueuer(AsyncpgDriver(conn))

        @pgq.entrypoint(STAMP)
        async def stamp(job: Job) -> None:
            # CLOCK_MONOTONIC is one clock for every process on Linux.
            stamps.send((json.loads(job.payload or b"{}")["seq"], time.monotonic()))

        async def watch() -> None:
            ready.set()
            while not stop.is_set():
                await asyncio.sleep(0.05)
            pgq.shutdown.set()

        watcher = asyncio.create_task(watch())
        await pgq.run(batch_size=int(spec["batch"]))
        await watcher
        await conn.close()

    uvloop.run(main())


async def latency(spec: dict[str, Any]) -> dict[str, Any]:
    """Enqueue one job at a time, each after the previous one started, then a random
    10-20 ms pause: every job meets an idle consumer (bench/rota_runs.py latency())."""
    samples, warmup = int(spec["samples"]), 10
    ctx = multiprocessing.get_context("spawn")
    receiver, sender = ctx.Pipe(duplex=False)
    ready, stop = ctx.Event(), ctx.Event()
    proc = ctx.Process(target=consumer_main, args=(spec, sender, ready, stop), daemon=True)
    proc.start()
    sender.close()
    from_call: list[float] = []
    from_commit: list[float] = []
    conn = await connect(spec)
    try:
        if not await asyncio.to_thread(ready.wait, 60):
            raise SystemExit("pgqueuer latency: the consumer did not start")
        await asyncio.sleep(1.0)  # its LISTEN is issued just after it reports ready
        queries = Queries(AsyncpgDriver(conn))
        for seq in range(warmup + samples):
            called = time.monotonic()
            await queries.enqueue(STAMP, json.dumps({"seq": seq}).encode())
            returned = time.monotonic()
            if not await asyncio.to_thread(receiver.poll, 10):
                raise SystemExit(f"pgqueuer latency: job {seq} did not start within 10s")
            got, started = receiver.recv()
            if got != seq:
                raise SystemExit(f"pgqueuer latency: expected job {seq}, got {got}")
            if seq >= warmup:
                from_call.append(started - called)
                from_commit.append(started - returned)
            await asyncio.sleep(random.uniform(0.01, 0.02))
    finally:
        await conn.close()
        stop.set()
        proc.join(15)
        if proc.is_alive():
            proc.kill()
            proc.join()
    return {"from_call": from_call, "from_commit": from_commit}


OPERATIONS = {
    "drain": drain,
    "enqueue_single": enqueue_single,
    "enqueue_bulk": enqueue_bulk,
    "latency": latency,
}
# On rota's schema, which the benchmark made: nothing of pgqueuer's is installed for them.
RAW_OPERATIONS = {"raw_insert": raw_insert, "raw_drain": raw_drain}


def main() -> None:
    spec = json.loads(sys.argv[1])
    raw_op = RAW_OPERATIONS.get(spec["op"])

    async def run() -> dict[str, Any]:
        if raw_op is not None:
            return await raw_op(spec)
        await install(spec)
        return await OPERATIONS[spec["op"]](spec)

    result = uvloop.run(run())
    result["version"] = pgqueuer.__version__
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
