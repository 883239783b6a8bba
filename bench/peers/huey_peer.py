"""huey on SQLite (SqliteHuey), measured the way rota is (docs/benchmarks.md#peers).

Run by the python of huey's own virtualenv (`.venv-bench/huey/`), never rota's:
`python huey_peer.py '<json spec>'`. It imports only the standard library and huey, and
prints one JSON line with the result.

The consumer is huey's own `Consumer` (what `huey_consumer` runs), in this process, with
`workers` threads (worker_type="thread", the fastest kind for tasks that do no work), no
periodic scheduler and health checks off. The file is in WAL mode with synchronous=FULL
(`fsync=True`), the durability rota's SQLite runs use.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from typing import Any

import huey
from huey import SqliteHuey
from huey.consumer import Consumer

# Set by the task: when the first job started and the last one ended (perf_counter).
_marks: dict[str, float] = {}
_done = [0]
_lock = threading.Lock()


def make_huey(path: str, *, fsync: bool) -> SqliteHuey:
    # results=False: a no-op returns None, which huey would not store anyway.
    h = SqliteHuey("bench", filename=path, fsync=fsync, results=False)

    @h.task(name="noop")
    def noop(n: int = 0) -> None:
        now = time.perf_counter()
        with _lock:
            _marks.setdefault("first", now)
            _marks["last"] = now
            _done[0] += 1

    h.noop = noop  # type: ignore[attr-defined]
    return h


def drain(spec: dict[str, Any]) -> dict[str, Any]:
    """Enqueue `jobs` no-op tasks, then drain them with huey's consumer. The window runs
    from the start of the first task to the end of the last one (huey deletes a task from
    its table when it dequeues it, so a finished no-op leaves nothing more to write)."""
    jobs, path = int(spec["jobs"]), spec["path"]
    # Prefill without fsync (synchronous=OFF): only the drain is measured.
    filler = make_huey(path, fsync=False)
    for i in range(jobs):
        filler.noop(n=i)  # type: ignore[attr-defined]
    filler.storage.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    filler.storage.close()
    h = make_huey(path, fsync=True)
    consumer = Consumer(
        h,
        workers=int(spec["workers"]),
        worker_type="thread",
        periodic=False,
        initial_delay=0.001,
        backoff=1.0,
        max_delay=0.001,
        check_worker_health=False,
    )
    cpu = time.process_time()
    started = time.perf_counter()
    consumer.start()
    deadline = started + float(spec.get("timeout", 300))
    # The consumer has no drain mode: watch the task's counter (a few microseconds a look).
    while _done[0] < jobs and time.perf_counter() < deadline:
        time.sleep(0.002)
    wall = time.perf_counter() - started
    cpu = time.process_time() - cpu
    consumer.stop(graceful=True)
    left = h.pending_count()
    if _done[0] != jobs or left:
        raise SystemExit(f"huey drain: {_done[0]} ran, {left} left, of {jobs}")
    return {
        "elapsed": _marks["last"] - _marks["first"],
        "wall": wall,
        "cpu": cpu,
        "completed": jobs,
    }


def main() -> None:
    spec = json.loads(sys.argv[1])
    if spec["op"] != "drain":
        raise SystemExit(f"huey peer: unknown operation {spec['op']!r}")
    result = drain(spec)
    result["version"] = huey.__version__
    sys.stdout.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
