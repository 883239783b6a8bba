"""A workflow, sagas and batches to look at: shared by the feature API tests and the
screenshots. Everything runs in this process with rota.testing.drain."""

from __future__ import annotations

import rota
from rota.testing import drain

NO_WAIT = rota.Backoff(base=0, jitter=False)


class CardDeclined(Exception):
    pass


def seed_features(app: rota.App) -> None:
    @app.task(name="etl.extract")
    def extract(day: str) -> int:
        return 5

    @app.task(name="etl.split")
    def split(ctx: rota.Context, day: str) -> list[str]:
        return ["ada", "bob", "cy", "dee", "eve"][ctx.workflow.index :: ctx.workflow.total]

    @app.task(name="etl.load", max_attempts=2, backoff=NO_WAIT)
    def load(customer: str, day: str) -> str:
        if customer == "cy" and day == "2026-11-28":
            raise TimeoutError("warehouse did not answer for cy")
        return f"loaded {customer}"

    @app.task(name="etl.report")
    def report(load: list[str], extract: int) -> str:
        return f"{len(load)} of {extract} loaded"

    etl = rota.Workflow("nightly-etl")
    extracted = etl.step(extract)
    split_step = etl.step(split, after=extracted, fan_out=2)
    loaded = etl.step(load, after=split_step, each="customer", max_attempts=2)
    etl.step(report, after=[loaded, extracted])

    fulfilment = rota.Saga("order-fulfilment", max_attempts=1, backoff=NO_WAIT)

    @fulfilment.step()
    def reserve_stock(data: dict) -> dict:
        return {"reservation": f"R-{data['order']}"}

    @reserve_stock.compensate
    def release_stock(data: dict) -> None:
        return None

    @fulfilment.step(permanent=[CardDeclined])
    def take_payment(data: dict) -> dict:
        if data["card"] == "declined":
            raise CardDeclined("card declined by issuer")
        return {"paid": data["total"]}

    def book_shipping(data: dict) -> str:
        return f"TRACK-{data['order']}"

    fulfilment.step(book_shipping)
    app.sagas.register(fulfilment)

    @app.task(name="images.resize", max_attempts=1)
    def resize(ctx: rota.Context, bucket: str) -> int:
        return ctx.index

    for day in ("2026-11-28", "2026-11-29"):
        app.workflows.start(etl, args={"day": day}, key=f"etl-{day}")
    for order, card in ((41, "ok"), (42, "declined"), (43, "ok")):
        app.sagas.start(
            fulfilment, key=f"order-{order}", data={"order": order, "card": card, "total": 4500}
        )
    app.batch(
        resize,
        completions=12,
        indexed=True,
        parallelism=4,
        args={"bucket": "photos"},
        name="thumbnails",
    )
    for _ in range(8):
        drain(app, with_scheduled=True)
        app.workflows.advance()
        app.sagas.supervise()
        app.batches.advance()
    # Work in flight: a saga and a workflow that have not run yet.
    app.sagas.start(fulfilment, key="order-44", data={"order": 44, "card": "ok", "total": 990})
    app.workflows.start(etl, args={"day": "2026-11-30"}, key="etl-2026-11-30")
    app.batch(
        resize,
        completions=40,
        indexed=True,
        parallelism=5,
        args={"bucket": "avatars"},
        name="avatars",
    )
    app.batches.advance()
