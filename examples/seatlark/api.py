"""Seatlark's checkout API (Starlette): POST /orders saves the order and enqueues its ticket
job in one transaction; GET /orders/{id} answers "where is my ticket?"; GET /orders searches.

    python -m examples.seatlark.api --port 8040     # uvicorn, on $ROTA_DATABASE_URL
"""

from __future__ import annotations

import argparse
import sqlite3
from typing import Any

import psycopg
import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import rota
from examples.seatlark import shop
from examples.seatlark.validation import (
    MAX_BODY_BYTES,
    Refused,
    Search,
    parse_json_object,
    parse_order,
    parse_search,
)

# What a database that is down or restarting raises: the client should retry (with the same
# `ref`, so a retry cannot place the order twice).
UNAVAILABLE = (rota.DatabaseUnavailableError, psycopg.OperationalError, sqlite3.OperationalError)


async def read_body(request: Request) -> bytes:
    """The request body, refusing oversized ones without reading them whole."""
    if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
        raise Refused(415, "unsupported_media_type", "send the order as application/json")
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > MAX_BODY_BYTES):
        raise Refused(413, "too_large", f"the body is over {MAX_BODY_BYTES} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise Refused(413, "too_large", f"the body is over {MAX_BODY_BYTES} bytes")
    return bytes(body)


async def create_order(request: Request) -> JSONResponse:
    order = parse_order(parse_json_object(await read_body(request)), shop.SHOWS)

    def place() -> shop.Placed:
        with shop.app.transaction() as conn:
            return shop.checkout(
                conn,
                ref=order.ref,
                customer=order.customer,
                email=order.email,
                show=order.show,
                quantity=order.quantity,
            )

    try:
        placed = await run_in_threadpool(place)
    except shop.OrderConflict as exc:
        raise Refused(409, "ref_conflict", str(exc), "ref") from None
    body = {"order": placed.order_id, "ref": order.ref, "job": placed.job_id}
    return JSONResponse(body, status_code=201 if placed.created else 200)


async def get_order(request: Request) -> JSONResponse:
    order_id = request.path_params["order_id"]
    if not 1 <= order_id <= 2**63 - 1:
        raise Refused(404, "not_found", f"no order {order_id}")
    rows = await run_in_threadpool(_order_rows, "WHERE id = ?", [order_id], 1)
    if not rows:
        raise Refused(404, "not_found", f"no order {order_id}")
    order = rows[0]
    job = await run_in_threadpool(shop.app.get_job, order["job"]) if order["job"] else None
    order["job_state"] = None if job is None else str(job.state)
    return JSONResponse(order)


async def search_orders(request: Request) -> JSONResponse:
    search = parse_search(dict(request.query_params), shop.SHOWS)
    if len(request.query_params.multi_items()) != len(request.query_params):
        raise Refused(422, "repeated_field", "give each search field once")
    where, params = _where(search)
    rows = await run_in_threadpool(_order_rows, where, params, search.limit)
    return JSONResponse({"orders": rows})


async def health(request: Request) -> JSONResponse:
    return JSONResponse({"ok": True})


def _where(search: Search) -> tuple[str, list[Any]]:
    clauses, params = [], []
    if search.customer is not None:
        # The name check allows no LIKE wildcards, so the value is matched literally.
        clauses.append("LOWER(customer) LIKE ?")
        params.append(f"%{search.customer.lower()}%")
    if search.show is not None:
        clauses.append("show = ?")
        params.append(search.show)
    if search.status is not None:
        clauses.append("status = ?")
        params.append(search.status)
    return ("WHERE " + " AND ".join(clauses)) if clauses else "", params


def _order_rows(where: str, params: list[Any], limit: int) -> list[dict[str, Any]]:
    with shop.app.transaction() as conn:
        rows = shop.fetch(
            conn,
            "SELECT id, ref, customer, show, quantity, status, ticket_code, job_id "
            f"FROM orders {where} ORDER BY id LIMIT ?",
            [*params, limit],
        )
    keys = ("id", "ref", "customer", "show", "quantity", "status", "ticket", "job")
    return [dict(zip(keys, row, strict=True)) for row in rows]


async def refused(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, Refused)
    return JSONResponse(exc.body(), status_code=exc.status)


async def unavailable(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(
        {"error": {"code": "unavailable", "message": "the database is unavailable; retry"}},
        status_code=503,
        headers={"Retry-After": "1"},
    )


def build() -> Starlette:
    handlers: dict[Any, Any] = {Refused: refused}
    handlers.update(dict.fromkeys(UNAVAILABLE, unavailable))
    return Starlette(
        routes=[
            Route("/orders", create_order, methods=["POST"]),
            Route("/orders", search_orders, methods=["GET"]),
            Route("/orders/{order_id:int}", get_order, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
        ],
        exception_handlers=handlers,
    )


api = build()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m examples.seatlark.api")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8040)
    args = parser.parse_args(argv)
    uvicorn.run(api, host=args.host, port=args.port, log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
