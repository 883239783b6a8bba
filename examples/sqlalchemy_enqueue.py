"""Enqueue in an SQLAlchemy session's transaction, sync and async: the job commits with
your ORM writes, or not at all.

    python -m examples.sqlalchemy_enqueue       # SQLite, in a temporary directory
    ROTA_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \
        python -m examples.sqlalchemy_enqueue    # PostgreSQL, with psycopg

`conn=` takes the Session itself (or an AsyncSession with `enqueue_async`): rota writes
the job on the connection the session holds, inside its open transaction.
"""

from __future__ import annotations

import asyncio
import os
import tempfile

from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import AsyncSession, create_async_engine
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

import rota
from rota.testing import drain

app = rota.App(
    os.environ.get("ROTA_DATABASE_URL")
    or f"sqlite:///{tempfile.mkdtemp(prefix='rota-example-')}/shop.db"
)


class Base(DeclarativeBase):
    pass


class Order(Base):
    __tablename__ = "orders"
    id: Mapped[int] = mapped_column(primary_key=True)
    total_cents: Mapped[int]


@app.task(queue="mail")
def send_receipt(order_id: int) -> str:
    return f"receipt for order {order_id} sent"


class CardDeclined(Exception):
    pass


def sqlalchemy_urls(url: rota.App) -> tuple[str, str]:
    """The same database as SQLAlchemy URLs: (sync, async)."""
    if url.url.dialect == "sqlite":
        return f"sqlite:///{url.url.path}", f"sqlite+aiosqlite:///{url.url.path}"
    rest = url.url.raw.split("://", 1)[1]
    return f"postgresql+psycopg://{rest}", f"postgresql+psycopg://{rest}"


def with_session(sync_url: str) -> tuple[rota.Job, rota.Job]:
    engine = create_engine(sync_url)
    Base.metadata.create_all(engine)
    with Session(engine) as session, session.begin():
        order = Order(total_cents=4500)
        session.add(order)
        session.flush()  # the order gets its id
        kept = send_receipt.enqueue(order_id=order.id, conn=session)
    try:
        with Session(engine) as session, session.begin():
            order = Order(total_cents=9900)
            session.add(order)
            session.flush()
            dropped = send_receipt.options(conn=session).enqueue(order_id=order.id)
            raise CardDeclined  # the order and its job roll back together
    except CardDeclined:
        pass
    engine.dispose()
    return kept, dropped


async def with_async_session(async_url: str) -> tuple[rota.Job, rota.Job]:
    engine = create_async_engine(async_url)
    async with AsyncSession(engine) as session, session.begin():
        order = Order(total_cents=1200)
        session.add(order)
        await session.flush()
        kept = await send_receipt.enqueue_async(order_id=order.id, conn=session)
    try:
        async with AsyncSession(engine) as session, session.begin():
            order = Order(total_cents=3300)
            session.add(order)
            await session.flush()
            dropped = await send_receipt.options(conn=session).enqueue_async(order_id=order.id)
            raise CardDeclined
    except CardDeclined:
        pass
    await engine.dispose()
    return kept, dropped


def main() -> None:
    app.migrate()
    sync_url, async_url = sqlalchemy_urls(app)
    kept, _ = with_session(sync_url)
    async_kept, _ = asyncio.run(with_async_session(async_url))
    # What was committed is stored, what was rolled back is not: two orders, two jobs.
    # (SQLite may give a rolled-back row's id to the next row: compare totals, not ids.)
    engine = create_engine(sync_url)
    with Session(engine) as session:
        totals = sorted(o.total_cents for o in session.query(Order))
    engine.dispose()
    jobs = sorted(job.id for job in app.list_jobs())
    assert totals == [1200, 4500] and jobs == sorted([kept.id, async_kept.id])
    print(f"Session: order {kept.args['order_id']} and its job committed, the other rolled back")
    print(
        f"AsyncSession: order {async_kept.args['order_id']} and its job committed, "
        "the other rolled back"
    )
    report = drain(app)
    print(f"drained {report.completed} jobs: {app.wait(kept)}; {app.wait(async_kept)}")
    app.close()


if __name__ == "__main__":
    main()
