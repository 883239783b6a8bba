"""The app of the operations e2e tests (`--app ops_app:app`): a slow task for the global
limit and a quick one for the rate limit, on $ROTA_DATABASE_URL."""

import time

import rota

app = rota.App()


@app.task(queue="limited", name="ops.hold")
def hold(seconds: float) -> None:
    time.sleep(seconds)


@app.task(queue="paced", name="ops.tick")
def tick() -> None: ...
