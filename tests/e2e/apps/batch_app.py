"""The app of the batch end-to-end test (`--app batch_app:app`): one indexed task that
takes a moment per index, on the database named by $ROTA_DATABASE_URL."""

import rota

app = rota.App()


@app.task
def chunk(ctx: rota.Context, pause: float) -> dict[str, object]:
    ctx.wait_cancelled(pause)
    return {"index": ctx.index, "total": ctx.total, "worker": ctx.worker_id}
