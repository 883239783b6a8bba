"""Async statements on PostgreSQL: psycopg's AsyncConnection on a small pool of its own,
opened on first use in the event loop that uses it, for enqueue_async and the worker's
claims. It runs the blocking driver's named statements and row building
(SQLDriver._insert, _conflict_plan, fetch_params, claimed), not SQL of its own. A call
made under a deadline (rota.drivers.deadlines) has its socket cut when the deadline
passes, as the blocking pool's CallWatch does."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row

from rota.drivers.adapters import plain_connection_async
from rota.drivers.base import JobInsert
from rota.drivers.database import Params, Row
from rota.drivers.deadlines import DeadlineFunc, current_deadline
from rota.drivers.postgres.database import QUERIES, SCRIPTS, has_rows
from rota.drivers.postgres.deadlines import cut
from rota.drivers.url import DatabaseURL
from rota.errors import (
    ConfigurationError,
    DatabaseUnavailableError,
    PermissionDeniedError,
    SchemaError,
)
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
        self._stale = False  # the deadlines changed: open new connections
        self.cut_total = 0  # calls whose connection was cut at their deadline

    async def _open(self) -> psycopg_pool.AsyncConnectionPool[Any]:
        loop = asyncio.get_running_loop()
        if self._pool is not None and (self._loop is not loop or self._stale):
            # An async pool belongs to the loop that opened it (asyncio.run() twice makes
            # two loops): leave the old one, whose loop is gone or not ours, to its loop.
            # New deadlines need new connections (their settings are in the conninfo).
            old, self._pool, self._stale = self._pool, None, False
            if self._loop is not None and not self._loop.is_closed():
                with contextlib.suppress(RuntimeError):
                    asyncio.run_coroutine_threadsafe(old.close(), self._loop)
        if self._pool is None:
            # A URL from a file is a callable: read again for every new connection.
            pool: psycopg_pool.AsyncConnectionPool[Any] = psycopg_pool.AsyncConnectionPool(
                self._conninfo,
                min_size=1,
                max_size=self._size,
                open=False,
                timeout=10.0,
                kwargs={"autocommit": True, "row_factory": dict_row},
                name="rota-async",
            )
            await pool.open(wait=False)
            self._pool, self._loop = pool, loop
        return self._pool

    def renew(self) -> None:
        """The deadlines changed (a worker starts): connections opened from now on carry
        the new ones, and the pool's current ones are closed."""
        self._stale = self._pool is not None

    @contextlib.asynccontextmanager
    async def _connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        pool = await self._open()
        deadline = current_deadline()
        at = None if deadline is None else deadline()
        # Under a deadline, waiting for a free connection counts against it too.
        wait = None if at is None else max(0.05, at - time.monotonic())
        with self._translated():
            async with pool.connection(timeout=wait) as conn:
                if deadline is None or at is None:
                    yield conn
                    return
                timer = _CutAt(self, conn, deadline, at)
                try:
                    yield conn
                finally:
                    timer.cancel()

    def _cut(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.cut_total += 1
        cut(conn)

    @contextlib.contextmanager
    def _translated(self) -> Any:
        try:
            yield
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseUnavailableError(
                f"PostgreSQL at {self._url.redacted()} is unreachable: {self._url.scrub(str(exc))}"
            ) from None
        except psycopg.errors.InsufficientPrivilege as exc:
            raise PermissionDeniedError(
                f"PostgreSQL refused: {exc.diag.message_primary} (the role connected lacks "
                "this privilege; see `rota db roles` and docs/security.md)"
            ) from None
        except psycopg.errors.UndefinedTable as exc:
            raise SchemaError(
                f"{exc.diag.message_primary}: the database has no rota schema; run `rota migrate`"
            ) from None
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(
                f"PostgreSQL error: {self._url.scrub(str(exc))}"
            ) from exc

    async def rows(self, name: str, params: Params) -> list[Row]:
        """One named statement on a pooled async connection (autocommit), and its rows."""
        async with self._connection() as own, own.cursor() as cur:
            return await AsyncSession(cur).all(name, params)

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


class _CutAt:
    """Cuts `conn`'s socket once `deadline` has passed, looking again when it comes (a
    job's deadline moves on when its lease is renewed). Cutting, unlike cancelling the
    task, sends nothing over a silent link: the call waiting on it fails at once and the
    pool drops the connection."""

    def __init__(
        self,
        owner: AsyncInserter,
        conn: psycopg.AsyncConnection[Any],
        deadline: DeadlineFunc,
        at: float,
    ) -> None:
        self._owner = owner
        self._conn = conn
        self._deadline = deadline
        self._loop = asyncio.get_running_loop()
        self._handle = self._loop.call_at(self._when(at), self._check)

    def _when(self, at: float) -> float:
        # time.monotonic() deadline on the loop's clock (also monotonic, maybe offset).
        return self._loop.time() + max(0.0, at - time.monotonic())

    def _check(self) -> None:
        at = self._deadline()
        if at is not None and time.monotonic() < at:
            self._handle = self._loop.call_at(self._when(at), self._check)
            return
        if at is not None:
            self._owner._cut(self._conn)

    def cancel(self) -> None:
        self._handle.cancel()


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
