"""The app of the observability e2e test, loaded with `--app observe_app:app`: tasks that
log through a plain logger and through ctx.log, one failing its first attempt."""

from __future__ import annotations

import logging

import rota

app = rota.App()
log = logging.getLogger("observe_app")


@app.task(queue="tickets", max_attempts=2, backoff=rota.Backoff(base=0.01, jitter=False))
def make_ticket(ctx: rota.Context, order: int) -> None:
    log.info("printing the ticket of order %s", order)
    ctx.log.info("attempt %s", ctx.attempt)
    if ctx.attempt == 1:
        raise ValueError("printer jammed")


@app.task(queue="tickets")
async def notify(order: int) -> None:
    log.warning("order %s is ready", order)
