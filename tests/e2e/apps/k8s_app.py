"""The app of the Kubernetes-side tests, loaded with `--app k8s_app:app` (this folder on
PYTHONPATH): a task that holds its slot until the test creates its gate file (worker and
SIGTERM), and tasks that fail in set ways (`rota run`)."""

from __future__ import annotations

from pathlib import Path

import rota

app = rota.App()


@app.task(queue="tickets", max_attempts=3)
def hold(ctx: rota.Context, gate: str) -> str:
    """Runs until `gate` exists; a stop request (grace over) ends it early."""
    path = Path(gate)
    while not path.exists():
        if ctx.wait_cancelled(0.02):
            raise RuntimeError("stopped before the gate opened")
    return "released"


@app.task(queue="tickets")
def quick() -> str:
    return "done"


@app.task(queue="reports", max_attempts=3, backoff=rota.Backoff(base=0.01, jitter=False))
def flaky(ctx: rota.Context, failures: int) -> int:
    """Fails its first `failures` attempts, then returns the attempt that succeeded."""
    if ctx.attempt <= failures:
        raise ConnectionError(f"downstream unavailable (try {ctx.attempt})")
    return ctx.attempt


@app.task(queue="reports", permanent=[ValueError])
def refuse(reason: str) -> None:
    raise ValueError(reason)
