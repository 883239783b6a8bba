"""Enqueue in your own transaction: the job is stored with your data, or not at all.

    python -m examples.transactional_enqueue        # SQLite, in a temporary directory
    ROTA_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \
        python -m examples.transactional_enqueue     # PostgreSQL, with psycopg

Pass `conn=` (a sqlite3 or psycopg connection with an open transaction) and rota writes the
job through that connection: your COMMIT stores the order and its job together, your ROLLBACK
drops both. No order is left without its receipt job, and no job points at an order that was
never saved (a transactional outbox, without an outbox table).
"""

from __future__ import annotations

import os
import sqlite3
import tempfile

import psycopg

import rota
from rota.testing import drain

app = rota.App(
    os.environ.get("ROTA_DATABASE_URL")
    or f"sqlite:///{tempfile.mkdtemp(prefix='rota-example-')}/shop.db"
)


@app.task(queue="mail")
def send_receipt(order_id: int) -> str:
    return f"receipt for order {order_id} sent"


class CardDeclined(Exception):
    pass


def with_sqlite(path: str) -> tuple[rota.Job, rota.Job]:
    """sqlite3 opens a transaction before the first INSERT; `with conn:` commits it at the
    end of the block, or rolls it back if the block raises."""
    conn = sqlite3.connect(path, timeout=30)
    conn.execute("CREATE TABLE IF NOT EXISTS orders (id INTEGER PRIMARY KEY, total_cents INT)")

    with conn:
        order_id = conn.execute(
            "INSERT INTO orders (total_cents) VALUES (?) RETURNING id", (4500,)
        ).fetchone()[0]
        kept = send_receipt.enqueue(order_id=order_id, conn=conn)

    try:
        with conn:
            order_id = conn.execute(
                "INSERT INTO orders (total_cents) VALUES (?) RETURNING id", (9900,)
            ).fetchone()[0]
            dropped = send_receipt.enqueue(order_id=order_id, conn=conn)
            raise CardDeclined  # something fails after the enqueue: both rows go away
    except CardDeclined:
        pass
    conn.close()
    return kept, dropped


def with_psycopg(url: str) -> tuple[rota.Job, rota.Job]:
    """psycopg: `conn.transaction()` commits at the end of the block, or rolls back if the
    block raises. (On an autocommit connection without it, each statement commits alone.)"""
    with psycopg.connect(url) as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS orders (id BIGSERIAL PRIMARY KEY, total_cents INT)"
        )
        conn.commit()

        with conn.transaction():
            row = conn.execute(
                "INSERT INTO orders (total_cents) VALUES (%s) RETURNING id", (4500,)
            ).fetchone()
            assert row is not None
            kept = send_receipt.enqueue(order_id=row[0], conn=conn)

        try:
            with conn.transaction():
                row = conn.execute(
                    "INSERT INTO orders (total_cents) VALUES (%s) RETURNING id", (9900,)
                ).fetchone()
                assert row is not None
                dropped = send_receipt.enqueue(order_id=row[0], conn=conn)
                raise CardDeclined
        except CardDeclined:
            pass
    return kept, dropped


def main() -> None:
    app.migrate()
    if app.url.dialect == "sqlite":
        kept, dropped = with_sqlite(app.url.path)
    else:
        kept, dropped = with_psycopg(app.url.raw)

    # The committed job is stored; the rolled-back one never existed for anyone else.
    assert app.get_job(kept.id) is not None
    assert app.get_job(dropped.id) is None
    print(f"committed:   job {kept.id} for order {kept.args['order_id']} is stored")
    print(f"rolled back: job {dropped.id} for order {dropped.args['order_id']} is gone")

    report = drain(app)
    done = app.get_job(kept.id)
    assert done is not None
    print(f"drained {report.completed} job: {done.result}")
    app.close()


if __name__ == "__main__":
    main()
