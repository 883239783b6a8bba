"""The app of the circuit breaker e2e test (`--app breaker_app:app`): a task that calls a
downstream service which is up while the file `downstream-up` exists in the worker's
directory, and down (slow, then an error) otherwise. Two queues run the same task: one
with a breaker, one without."""

import time
from pathlib import Path

import rota

app = rota.App()


@app.task(queue="guarded", name="brk.call", max_attempts=5, backoff=rota.Backoff(0.05, cap=0.1))
def call(n: int) -> None:
    if not Path("downstream-up").exists():
        time.sleep(0.05)
        raise ConnectionError("downstream unavailable")
