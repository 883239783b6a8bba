"""Async enqueue on PostgreSQL: psycopg's AsyncConnection on a small pool of its own,
opened on first use in the event loop that uses it. It runs the blocking driver's named
statements and row building (SQLDriver._insert, _conflict_plan), not SQL of its own."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from rota.drivers.adapters import plain_connection_async
from rota.drivers.base import JobInsert
from rota.drivers.database import Params, Row
from rota.drivers.postgres.database import QUERIES, SCRIPTS, has_rows
from rota.drivers.postgres.pool import AsyncPool
from rota.drivers.url import DatabaseURL
from rota.errors import ConfigurationError, DatabaseUnavailableError, SchemaError
from rota.job import Job

if TYPE_CHECKING:
    from rota.drivers.sql import SQLDriver


class AsyncSession:
    """Named statements on one async cursor (PostgresSession's twin)."""

    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.AsyncCursor[Any]) -> None:
        self._cursor = cursor

    async def all(self, name: str, params: Params | None = None) -> list[Row]:
        cur = self._cursor
        rows: list[Row] = []
        for statement in SCRIPTS[name] if len(SCRIPTS[name]) > 1 else [QUERIES[name]]:
            await cur.execute(statement, params or {})
            if has_rows(cur):
                rows.extend(await cur.fetchall())
        return rows


class AsyncInserter:
    """The async insert of one PostgresDriver, and the pool it runs on."""

    def __init__(self, url: DatabaseURL, conninfo: str | Callable[[], str], size: int) -> None:
        self._url = url
        self._conninfo = conninfo
        self._size = max(1, size)
        self._pool: psycopg_pool.AsyncConnectionPool[Any] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    async def _open(self) -> psycopg_pool.AsyncConnectionPool[Any]:
        loop = asyncio.get_running_loop()
        if self._pool is not None and self._loop is not loop:
            # An async pool belongs to the loop that opened it (asyncio.run() twice makes
            # two loops): leave the old one, whose loop is gone or not ours, to its loop.
            old, self._pool = self._pool, None
            if self._loop is not None and not self._loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    asyncio.run_coroutine_threadsafe(old.close(), self._loop)
        if self._pool is None:
            # A URL from a file is a callable: read again for every new connection.
            pool: psycopg_pool.AsyncConnectionPool[Any] = AsyncPool(
                self._conninfo,
                min_size=1,
                max_size=self._size,
                open=False,
                timeout=10.0,
                kwargs={"autocommit": True, "row_factory": dict_row},
                name="rota-async",
            )
            # Set before the first await, so that callers arriving meanwhile share it.
            self._pool, self._loop = pool, loop
            try:
                # Wait for the first connection: a connection still being made when a
                # short-lived loop ends (asyncio.run(task.enqueue_async(...))) is cancelled
                # mid-connect, and psycopg_pool's retry of it kept that loop from closing.
                await pool.open(wait=True, timeout=10.0)
            except BaseException:
                if self._pool is pool:
                    self._pool = None
                await pool.close()
                raise
        return self._pool

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        with self._translated():
            pool = await self._open()
            async with pool.connection() as conn:
                yield conn

    @contextlib.contextmanager
    def _translated(self) -> Any:
        try:
            yield
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseUnavailableError(
                f"PostgreSQL at {self._url.redacted()} is unreachable: {self._url.scrub(str(exc))}"
            ) from None
        except psycopg.errors.UndefinedTable as exc:
            raise SchemaError(
                f"{exc.diag.message_primary}: the database has no rota schema; run `rota migrate`"
            ) from None
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(
                f"PostgreSQL error: {self._url.scrub(str(exc))}"
            ) from exc

    async def insert(
        self, driver: SQLDriver, rows: Sequence[JobInsert], conn: object = None
    ) -> list[Job]:
        """SQLDriver.job_insert_many, awaited: the same statements in the same order."""
        if not rows:
            return []
        result: list[Job | None] = [None] * len(rows)
        everyone = range(len(rows))
        if conn is None:
            async with self._connection() as own:
                async with own.cursor() as cur:
                    inserted = await AsyncSession(cur).all(*driver._insert(rows))
                driver._insert_into(inserted, rows, everyone, result)
                if any(job is None for job in result):
                    async with own.transaction(), own.cursor() as cur:
                        await _run_plan(driver, AsyncSession(cur), rows, result)
        else:
            caller = await plain_connection_async(conn)
            if not isinstance(caller, psycopg.AsyncConnection):
                raise ConfigurationError(
                    "conn= of an async enqueue on PostgreSQL must be a psycopg "
                    "AsyncConnection or an SQLAlchemy AsyncSession/AsyncConnection, "
                    f"not {type(conn).__name__}"
                )
            with self._translated():
                async with caller.cursor(row_factory=dict_row) as cur:
                    session = AsyncSession(cur)
                    inserted = await session.all(*driver._insert(rows))
                    driver._insert_into(inserted, rows, everyone, result)
                    await _run_plan(driver, session, rows, result)
        return [job for job in result if job is not None]

    def close(self) -> None:
        """Close the pool if its loop can still run it; else let it go."""
        pool, loop, self._pool, self._loop = self._pool, self._loop, None, None
        if pool is None or loop is None or loop.is_closed():
            return
        if loop.is_running():
            # Closed from inside (or beside) its loop: schedule the close there.
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(lambda: loop.create_task(pool.close()))
            return
        loop.run_until_complete(pool.close())

    async def aclose(self) -> None:
        pool, self._pool, self._loop = self._pool, None, None
        if pool is not None:
            await pool.close()


async def _run_plan(
    driver: SQLDriver, session: AsyncSession, rows: Sequence[JobInsert], result: list[Job | None]
) -> None:
    plan = driver._conflict_plan(rows, result)
    try:
        step = next(plan)
        while True:
            step = plan.send(await session.all(*step))
    except StopIteration:
        pass
