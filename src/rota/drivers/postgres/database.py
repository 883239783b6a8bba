"""PostgreSQL behind the dialect seam: psycopg 3 on a connection pool (autocommit for
single statements, explicit transactions for several), errors translated to rota's, and a
codec that passes PostgreSQL's native types through."""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

import psycopg
import psycopg_pool
from psycopg.rows import dict_row, tuple_row
from psycopg.types.json import set_json_loads

from rota.drivers import queries
from rota.drivers.adapters import plain_connection
from rota.drivers.database import Params, Row
from rota.drivers.deadlines import Deadlines, current_deadline
from rota.drivers.postgres.deadlines import CallWatch, conninfo_with
from rota.drivers.postgres.lane import Lane
from rota.drivers.postgres.pool import Pool, readable
from rota.drivers.postgres.spare import Spare
from rota.drivers.url import DatabaseURL, SecretFilter
from rota.errors import (
    ConfigurationError,
    DatabaseUnavailableError,
    PermissionDeniedError,
    SchemaError,
)
from rota.payload import loads

QUERIES = queries.load("postgres")
# Each named query as its statements: one, or a script's (run in order, one transaction).
SCRIPTS = {name: queries.statements_of(text) for name, text in QUERIES.items()}
log = logging.getLogger("rota.postgres")

Connection = psycopg.Connection[Any]


class PostgresCodec:
    def time(self, value: Any) -> datetime | None:
        return value  # type: ignore[no-any-return]

    def instant(self, value: Any) -> datetime:
        assert isinstance(value, datetime)
        return value

    def json_time(self, value: Any) -> datetime | None:
        if value is None or isinstance(value, datetime):
            return value
        return datetime.fromisoformat(value)

    def time_param(self, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ConfigurationError("pass a timezone-aware datetime (e.g. datetime.now(UTC))")
        return value

    def json(self, value: Any) -> Any:
        return value

    def flag(self, value: Any) -> bool:
        return bool(value)

    def array(self, values: Sequence[Any] | None) -> list[Any] | None:
        return None if values is None else list(values)

    def columns(
        self, name: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        return {f"{name}_{col}": [row[i] for row in rows] for i, col in enumerate(names)}

    def positions(self, row: Row) -> dict[str, Any]:
        return {name: name for name in row.keys()}  # noqa: SIM118  # the Row protocol's keys()

    def time_decoder(self) -> Callable[[Any], datetime | None]:
        return self.time

    def completions(
        self, name: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        return self.columns(name, names, rows)

    def row(self, name: str, names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
        return {f"{name}_{col}": value for col, value in zip(names, values, strict=True)}


def read_json_fast(conn: psycopg.Connection[Any] | psycopg.AsyncConnection[Any]) -> None:
    """Read json and jsonb values (a claimed job's arguments and meta) with rota's faster
    `loads` on this connection only: psycopg's default is `json.loads`."""
    set_json_loads(loads, conn)


def has_rows(cur: psycopg.Cursor[Any] | psycopg.AsyncCursor[Any]) -> bool:
    """Whether the last statement returned rows (it had columns). `cursor.description`
    answers the same but builds a Column object per column first: a tenth of an
    enqueue's client time."""
    result = cur.pgresult
    return result is not None and result.nfields > 0


# The hot path's statements, whose result columns their text spells out (no `*` over a
# table: the schema cannot change them). Their rows come as tuples (psycopg's C path) and
# are named here with the names read once: psycopg's dict_row decodes every name and
# builds a row maker on every execute, a tenth of a single enqueue's client work.
TUPLE_FETCHED = frozenset(
    {
        "job_insert_plain",
        "job_insert_one",
        "job_insert_many",
        "job_insert_many_plain",
        "job_insert_many_uniform",
        "job_claim_plain",
        "job_claim_gated",
        "job_complete_many",
        "job_lease_renew",
    }
)
_COLUMNS: dict[str, list[str]] = {}
# Run on libpq directly when no caller's connection is given (rota.drivers.postgres.lane):
# a single enqueue, whose time is mostly psycopg's client work around one round trip.
LANE = Lane(QUERIES, frozenset({"job_insert_plain"}))


def _named_rows(cur: psycopg.Cursor[Any], name: str) -> list[Row]:
    """The rows of `cur` (a tuple-row cursor that ran statement `name`) as dicts."""
    if not has_rows(cur):
        return []
    rows = cur.fetchall()
    names = _COLUMNS.get(name)
    if names is None or (rows and len(names) != len(rows[0])):
        names = _COLUMNS[name] = [column.name for column in cur.description or ()]
    return [dict(zip(names, row, strict=True)) for row in rows]


class PostgresSession:
    __slots__ = ("_cursor",)

    def __init__(self, cursor: psycopg.Cursor[Any]) -> None:
        self._cursor = cursor

    @property
    def connection(self) -> Connection:
        return self._cursor.connection

    def all(self, name: str, params: Params | None = None) -> list[Row]:
        cur = self._cursor
        statements = SCRIPTS[name]
        if len(statements) == 1:
            cur.execute(QUERIES[name], params or {})
            return cur.fetchall() if has_rows(cur) else []
        rows: list[Row] = []
        for statement in statements:
            cur.execute(statement, params or {})
            if has_rows(cur):
                rows.extend(cur.fetchall())
        return rows

    def one(self, name: str, params: Params | None = None) -> Row | None:
        rows = self.all(name, params)
        return rows[0] if rows else None

    def value(self, name: str, params: Params | None = None) -> Any:
        row = self.one(name, params)
        return None if row is None else next(iter(row.values()), None)  # type: ignore[attr-defined]

    def count(self, name: str, params: Params | None = None) -> int:
        self._cursor.execute(QUERIES[name], params or {})
        return self._cursor.rowcount

    def many(self, name: str, params: Sequence[Params]) -> None:
        if params:
            self._cursor.executemany(QUERIES[name], params)


class PostgresDatabase:
    dialect = "postgres"

    def __init__(
        self, url: DatabaseURL, *, pool_size: int = 4, deadlines: Deadlines | None = None
    ) -> None:
        self.url = url
        self.codec = PostgresCodec()
        # Read again for every new connection: a URL from a file picks up a rotated
        # password (docs/security.md), and a worker's deadlines apply from its start on.
        self.deadlines = deadlines or Deadlines()
        self.watch = CallWatch()
        self._pool = Pool(
            self.conninfo,
            min_size=1,
            max_size=max(1, pool_size),
            open=False,
            timeout=10.0,
            reconnect_timeout=86400.0,  # keep trying: a database that is down comes back
            # Autocommit: a single statement needs no BEGIN/COMMIT round trips; several
            # statements open a transaction explicitly (write()).
            kwargs={"autocommit": True, "row_factory": dict_row},
            check=_check_connection,
            configure=read_json_fast,
            name="rota",
        )
        self._spare = Spare(self._pool)
        self._opened = False
        self._closed = False
        # psycopg's pool logs connection errors, which can quote the connection string.
        self._log_filter = SecretFilter(url)
        logging.getLogger("psycopg.pool").addFilter(self._log_filter)

    # --- connections ------------------------------------------------------------------

    def conninfo(self) -> str:
        """The connection string of a new connection: the URL with the deadlines added
        (the URL's own settings win)."""
        return conninfo_with(self.url.current(), self.deadlines)

    def set_deadlines(self, deadlines: Deadlines) -> None:
        """Use `deadlines` for connections opened from now on (a worker derives them from
        its lease); the pool's idle connections are replaced, so that every connection
        the worker uses has them."""
        self.deadlines = deadlines
        if self._opened:
            self._pool.drain()
            self._spare.drop()  # returned after the drain: the pool replaces it too

    @contextlib.contextmanager
    def connection(self) -> Iterator[Connection]:
        """A pooled connection (autocommit), with psycopg's errors made rota's."""
        conn = self._checkout()
        try:
            with self.watch.watching(conn):
                yield conn
        except psycopg.Error as exc:
            self._raise_translated(exc)
            raise
        finally:
            self._spare.release(conn)  # the pool rolls back a transaction left open

    def _checkout(self) -> Connection:
        """The spare connection, else one from the pool, waiting at most until the call's
        deadline (rota.drivers.postgres.spare).

        Not the pool's connection(): that one also wraps the connection in `with conn:`, a
        COMMIT call that an autocommit connection makes for nothing, and times the use, on
        every call (about a tenth of a single enqueue's client CPU)."""
        if self._closed:
            raise DatabaseUnavailableError("the database is closed")
        if not self._opened:
            self._pool.open(wait=False)
            self._opened = True
        try:
            return self._spare.checkout(_checkout_timeout())
        except psycopg_pool.PoolTimeout as exc:
            raise DatabaseUnavailableError(
                f"PostgreSQL at {self.url.redacted()} is unreachable: {self.url.scrub(str(exc))}"
            ) from None

    def _raise_translated(self, exc: psycopg.Error) -> None:
        """Raise rota's error for `exc` where rota has one (else return)."""
        if isinstance(exc, psycopg.errors.InsufficientPrivilege):
            # A least-privilege role (`rota db roles`) was refused by the database.
            raise PermissionDeniedError(
                f"PostgreSQL refused: {exc.diag.message_primary} (the role connected lacks "
                "this privilege; see `rota db roles` and docs/security.md)"
            ) from None
        if isinstance(exc, psycopg.errors.UndefinedTable):
            raise SchemaError(
                f"{exc.diag.message_primary}: the database has no rota schema; run `rota migrate`"
            ) from None
        if isinstance(exc, psycopg.OperationalError):
            raise DatabaseUnavailableError(f"PostgreSQL error: {self.url.scrub(str(exc))}") from exc

    def connection_of(self, conn: object) -> Connection:
        conn = plain_connection(conn)  # a SQLAlchemy session, Django's connection
        if not isinstance(conn, psycopg.Connection):
            raise ConfigurationError(
                f"conn= must be a psycopg.Connection for a PostgreSQL app, "
                f"not {type(conn).__name__}"
            )
        return conn

    # --- the seam -----------------------------------------------------------------------

    def query(
        self, name: str, params: Params | None = None, conn: Connection | None = None
    ) -> list[Row]:
        if conn is None and len(SCRIPTS[name]) == 1:
            return self._single(name, params)
        with self.read(conn) as session:
            return session.all(name, params)

    def execute(
        self, name: str, params: Params | None = None, conn: Connection | None = None
    ) -> list[Row]:
        # One statement is atomic in autocommit: no BEGIN/COMMIT round trips. A script
        # needs a transaction of its own.
        if len(SCRIPTS[name]) > 1:
            with self.write(conn) as session:
                return session.all(name, params)
        return self.query(name, params, conn)

    def _single(self, name: str, params: Params | None) -> list[Row]:
        """One statement on a pooled connection, in autocommit: what connection(), read()
        and a session do, without building any of them (a single enqueue is mostly client
        time); the hot path's rows fetched as tuples (TUPLE_FETCHED)."""
        conn = self._checkout()
        try:
            with self.watch.watching(conn):
                if name in LANE:
                    laned = LANE.run(conn, name, params or {})
                    if laned is not None:
                        return laned
                if name in TUPLE_FETCHED:
                    cur = conn.cursor(row_factory=tuple_row)
                    return _named_rows(cur.execute(QUERIES[name], params or {}), name)
                rows = conn.execute(QUERIES[name], params or {})
                return rows.fetchall() if has_rows(rows) else []
        except psycopg.Error as exc:
            self._raise_translated(exc)
            raise
        finally:
            self._spare.release(conn)

    @contextlib.contextmanager
    def read(self, conn: Connection | None = None) -> Iterator[PostgresSession]:
        if conn is not None:
            with self.connection_of(conn).cursor(row_factory=dict_row) as cur:
                yield PostgresSession(cur)
            return
        with self.connection() as own, own.cursor() as cur:
            yield PostgresSession(cur)

    @contextlib.contextmanager
    def write(self, conn: Connection | None = None) -> Iterator[PostgresSession]:
        if conn is not None:
            # The caller's transaction: join it, and let the caller commit or roll back.
            with self.connection_of(conn).cursor(row_factory=dict_row) as cur:
                yield PostgresSession(cur)
            return
        with self.connection() as own, own.transaction(), own.cursor() as cur:
            yield PostgresSession(cur)

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[PostgresSession]:
        with self.connection() as own, own.transaction(), own.cursor() as cur:
            cur.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield PostgresSession(cur)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Connection]:
        """A pooled connection in a transaction, committed when the block exits cleanly."""
        with self.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        self._closed = True
        self.watch.close()
        if self._opened:
            self._spare.close()
            self._pool.close()
        logging.getLogger("psycopg.pool").removeFilter(self._log_filter)


__all__ = [
    "QUERIES",
    "SCRIPTS",
    "TUPLE_FETCHED",
    "Connection",
    "PostgresCodec",
    "PostgresDatabase",
    "PostgresSession",
    "has_rows",
]


def _check_connection(conn: psycopg.Connection[Any]) -> None:
    """Checked on every checkout, so no call fails on a session the server has ended (a
    restart, a failover, pg_terminate_backend). An idle pooled connection has nothing to
    read, and one the server ended has its goodbye (or EOF) waiting: only then is the full
    round-trip check run (psycopg_pool's check_connection), which raises and makes the
    pool discard it and hand out another. The probe costs a syscall, not a round trip."""
    if readable(conn.pgconn.socket):
        psycopg_pool.ConnectionPool.check_connection(conn)


def _checkout_timeout() -> float | None:
    """How long a call may wait for a free connection: until its deadline when it has
    one (the pool's own 10 s otherwise). Calls hung on a silent link hold connections
    until they are cut, and a heartbeat queued behind them must fail in time to be
    retried, not wait out the pool."""
    deadline = current_deadline()
    at = None if deadline is None else deadline()
    return None if at is None else max(0.05, at - time.monotonic())
