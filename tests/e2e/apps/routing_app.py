"""The app of the routing e2e test (`--app routing_app:app`): a task that needs a GPU
and one that runs anywhere, on $ROTA_DATABASE_URL."""

import time

import rota

app = rota.App()


@app.task(queue="ml", name="route.train", requires={"gpu"})
def train() -> None:
    time.sleep(0.02)


@app.task(queue="ml", name="route.tidy")
def tidy() -> None:
    time.sleep(0.02)
