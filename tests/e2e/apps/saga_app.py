"""A saga for the kill test: steps make an outside effect deduplicated by a business
idempotency key (saga key + effect), or write to this database inside the transaction
that records the move (pay, refund); every call is logged in its own committed
transaction, so a test can tell calls from effects."""

from __future__ import annotations

import os
import random
import time
from typing import Any

import rota

app = rota.App(os.environ.get("ROTA_DATABASE_URL", "sqlite:///saga.db"))
fulfilment = rota.Saga("kill-fulfilment", queue="sagas", max_attempts=100, compensate_attempts=100)


def _mark() -> str:
    return "?" if app.driver.dialect == "sqlite" else "%s"


def effect(ctx: rota.Context, data: dict[str, Any], what: str) -> None:
    m = _mark()
    saga_key = ctx.meta["saga"]["key"]
    with app.transaction() as conn:
        conn.execute(f"INSERT INTO calls VALUES ({m}, {m}, {m})", (saga_key, what, ctx.attempt))
    time.sleep(random.uniform(0, 0.15))  # a kill here repeats the call
    with app.transaction() as conn:
        conn.execute(
            f"INSERT INTO api VALUES ({m}, {m}, {m}) ON CONFLICT (key) DO NOTHING",
            (f"{saga_key}/{what}", saga_key, what),
        )
    time.sleep(random.uniform(0, 0.15))  # a kill here repeats the call; the key absorbs it


@fulfilment.step
def reserve(ctx: rota.Context, data: dict[str, Any]) -> dict[str, Any]:
    effect(ctx, data, "reserve")
    return {"reserved": True}


@reserve.compensate
def release(ctx: rota.Context, data: dict[str, Any]) -> None:
    effect(ctx, data, "release")


def ledger(ctx: rota.Context, conn: Any, what: str) -> None:
    """A write to this database in the transaction that records the move: no key needed.
    (No call log here: on SQLite this thread holds the write lock until the move commits.)"""
    m = _mark()
    time.sleep(random.uniform(0, 0.1))
    conn.execute(f"INSERT INTO ledger VALUES ({m}, {m})", (ctx.meta["saga"]["key"], what))
    time.sleep(random.uniform(0, 0.1))  # a kill here rolls the write back with the move


@fulfilment.step(transaction=True)
def pay(ctx: rota.Context, data: dict[str, Any], conn: Any) -> dict[str, Any]:
    ledger(ctx, conn, "pay")
    return {"paid": True}


@pay.compensate(transaction=True)
def refund(ctx: rota.Context, data: dict[str, Any], conn: Any) -> None:
    ledger(ctx, conn, "refund")


@fulfilment.step
def ship(ctx: rota.Context, data: dict[str, Any]) -> dict[str, Any]:
    if data.get("fail"):
        time.sleep(random.uniform(0, 0.1))
        raise rota.Discard("no courier for this address")
    effect(ctx, data, "ship")
    return {"shipped": True}


app.sagas.register(fulfilment)
