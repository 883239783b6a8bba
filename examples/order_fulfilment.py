"""A three-step saga: reserve stock, take payment, book shipping, each undone in reverse
when a later step fails for good.

    python -m examples.order_fulfilment        # SQLite, in a temporary directory
    ROTA_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \\
        python -m examples.order_fulfilment     # PostgreSQL

Three orders run on a worker in this process: one goes through, one has its card declined
(the stock is released), and one finds no courier (the payment is refunded, then the stock
released). Each step calls an outside service with an idempotency key made of the order and
the step, so a step that runs again after a crash does not charge twice.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from typing import Any

import rota

app = rota.App(
    os.environ.get("ROTA_DATABASE_URL")
    or f"sqlite:///{tempfile.mkdtemp(prefix='rota-example-')}/shop.db"
)


class Service:
    """Stands in for a partner API that deduplicates requests by idempotency key."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.done: dict[str, str] = {}

    def call(self, key: str, what: str) -> str:
        return self.done.setdefault(key, f"{self.name}-{len(self.done) + 1}")


stock, payments, couriers = Service("RSV"), Service("PAY"), Service("SHP")


class CardDeclined(Exception):
    pass


fulfilment = rota.Saga("order-fulfilment", queue="orders", max_attempts=3)


@fulfilment.step(timeout=30)
def reserve_stock(data: dict[str, Any]) -> dict[str, Any]:
    reservation = stock.call(f"{data['order_id']}/reserve", f"{data['items']} items")
    return {"reservation": reservation}


@reserve_stock.compensate
def release_stock(data: dict[str, Any]) -> None:
    stock.call(f"{data['order_id']}/release", data["reservation"])


# A declined card will not succeed on a retry: fail the step at once.
@fulfilment.step(timeout=30, permanent=[CardDeclined])
def take_payment(data: dict[str, Any]) -> dict[str, Any]:
    if data["card"] == "declined":
        raise CardDeclined(f"card declined for {data['order_id']}")
    return {"payment": payments.call(f"{data['order_id']}/charge", str(data["total"]))}


@take_payment.compensate
def refund_payment(data: dict[str, Any]) -> None:
    payments.call(f"{data['order_id']}/refund", data["payment"])


@fulfilment.step(timeout=30, max_attempts=2, backoff=rota.Backoff(base=0.05, cap=0.1))
def book_shipping(data: dict[str, Any]) -> dict[str, Any]:
    if data["address"] == "Atlantis":
        raise RuntimeError("no courier delivers to Atlantis")
    return {"tracking": couriers.call(f"{data['order_id']}/ship", data["address"])}


app.sagas.register(fulfilment)

ORDERS = {
    "order-41": {"items": 2, "total": 4500, "card": "ok", "address": "Berlin"},
    "order-42": {"items": 1, "total": 990, "card": "declined", "address": "Lyon"},
    "order-43": {"items": 5, "total": 12000, "card": "ok", "address": "Atlantis"},
}


async def run_until_finished(keys: list[str]) -> None:
    settings = rota.WorkerSettings(
        queues={"orders": 4}, poll_interval=0.1, stage_interval=0.1, leader_ttl=2.0, grace=5.0
    )
    worker = rota.Worker(app, settings)
    running = asyncio.create_task(worker.run())
    try:
        while not all(app.sagas.get(k).status.finished for k in keys):
            await asyncio.sleep(0.05)
    finally:
        worker.stop()
        await running


def main() -> None:
    app.migrate()
    for key, order in ORDERS.items():
        app.sagas.start(fulfilment, key=key, data={"order_id": key, **order})
    asyncio.run(run_until_finished(list(ORDERS)))
    for key in ORDERS:
        saga = app.sagas.get(key)
        print(f"{key}: {saga.status}" + (f" ({saga.error})" if saga.error else ""))
        for entry in saga.history:
            print(f"    {entry['event']:<24} {entry.get('step') or '':<15} -> {entry['status']}")
    print("stock calls:   ", sorted(stock.done))
    print("payment calls: ", sorted(payments.done))
    print("courier calls: ", sorted(couriers.done))
    app.close()


if __name__ == "__main__":
    main()
