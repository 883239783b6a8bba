"""SQLite behind the dialect seam: one file shared by every process on a host, WAL mode,
`BEGIN IMMEDIATE` for writes (queued on a lock within the process), and the codec for
times as Unix seconds, JSON as text and booleans as integers."""

from __future__ import annotations

import contextlib
import json
import queue
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

from rota.drivers import queries
from rota.drivers.adapters import plain_connection
from rota.drivers.database import Params, Row
from rota.drivers.url import DatabaseURL
from rota.errors import ConfigurationError, DatabaseUnavailableError, SchemaError
from rota.payload import loads

QUERIES = queries.load("sqlite")
# Each named query as its statements: one, or a script's (run in order, one transaction).
SCRIPTS = {name: queries.statements_of(text) for name, text in QUERIES.items()}


# A plain completion (Codec.completions) carries only these; it goes in the parameter `p`.
_PLAIN_COLUMNS = ("id", "token", "state")
_PLAIN_PARAM = "p"
# Waiting for another process's write lock: the first try again after WRITE_WAIT_FIRST,
# then doubling up to WRITE_WAIT_STEP (a try is a few system calls while the lock is held).
WRITE_WAIT_FIRST = 0.0002
WRITE_WAIT_STEP = 0.001


class SQLiteCodec:
    def time(self, value: Any) -> datetime | None:
        return None if value is None else datetime.fromtimestamp(value, UTC)

    def instant(self, value: Any) -> datetime:
        return datetime.fromtimestamp(value, UTC)

    def json_time(self, value: Any) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, str):
            return datetime.fromisoformat(value)
        return datetime.fromtimestamp(value, UTC)

    def time_param(self, value: datetime | None) -> float | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ConfigurationError("pass a timezone-aware datetime (e.g. datetime.now(UTC))")
        return value.timestamp()

    def json(self, value: Any) -> Any:
        return loads(value) if isinstance(value, str | bytes) else value

    def flag(self, value: Any) -> bool:
        return bool(value)

    def array(self, values: Sequence[Any] | None) -> str | None:
        return None if values is None else json.dumps(list(values))

    def columns(
        self, name: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        return {name: json.dumps([dict(zip(names, row, strict=True)) for row in rows])}

    def positions(self, row: Row) -> dict[str, Any]:
        return {name: i for i, name in enumerate(row.keys())}

    def time_decoder(self) -> Callable[[Any], datetime | None]:
        decoded: dict[Any, datetime | None] = {None: None}

        def time(value: Any) -> datetime | None:
            try:
                return decoded[value]
            except KeyError:
                found = decoded[value] = self.time(value)
                return found

        return time

    def completions(
        self, name: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        plain: dict[str, Any] = {}
        rest: list[dict[str, Any]] = []
        at_id, at_token, at_state = names.index("id"), names.index("token"), names.index("state")
        others = [i for i, column in enumerate(names) if column not in _PLAIN_COLUMNS]
        for row in rows:
            job_id = str(row[at_id])
            # (A second completion of one job, under another lease token, goes to `rest`:
            # the fence takes whichever token the job holds.)
            if row[at_state] == "completed" and job_id not in plain:
                for i in others:
                    value = row[i]
                    if value is not None and value is not False:
                        break
                else:
                    plain[job_id] = row[at_token]
                    continue
            rest.append(dict(zip(names, row, strict=True)))
        return {_PLAIN_PARAM: json.dumps(plain), name: json.dumps(rest)}

    def row(self, name: str, names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
        return self.columns(name, names, [values])


class SQLiteSession:
    __slots__ = ("_cursor",)

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor

    @property
    def connection(self) -> sqlite3.Connection:
        return self._cursor.connection

    def all(self, name: str, params: Params | None = None) -> list[Row]:
        statements = SCRIPTS[name]
        if len(statements) == 1:
            return self._cursor.execute(QUERIES[name], params or {}).fetchall()
        rows: list[Row] = []
        for statement in statements:
            rows.extend(self._cursor.execute(statement, params or {}).fetchall())
        return rows

    def one(self, name: str, params: Params | None = None) -> Row | None:
        rows = self.all(name, params)
        return rows[0] if rows else None

    def value(self, name: str, params: Params | None = None) -> Any:
        rows = self.all(name, params)
        return rows[0][rows[0].keys()[0]] if rows else None

    def count(self, name: str, params: Params | None = None) -> int:
        return self._cursor.execute(QUERIES[name], params or {}).rowcount

    def many(self, name: str, params: Sequence[Params]) -> None:
        if params:
            self._cursor.executemany(QUERIES[name], params)


class SQLiteDatabase:
    dialect = "sqlite"

    def __init__(self, url: DatabaseURL) -> None:
        self.url = url
        self.path = url.path
        self.codec = SQLiteCodec()
        self.synchronous = url.options.get("synchronous", "FULL").upper()
        if self.synchronous not in {"OFF", "NORMAL", "FULL", "EXTRA"}:
            raise ConfigurationError(f"bad synchronous={self.synchronous!r} in the SQLite URL")
        try:
            self.busy_ms = int(url.options.get("busy_timeout", "30000"))
        except ValueError:
            raise ConfigurationError(
                "busy_timeout in the SQLite URL must be milliseconds"
            ) from None
        self._idle: queue.SimpleQueue[sqlite3.Connection] = queue.SimpleQueue()
        self._all: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        # Writers in one process queue here instead of in SQLite's busy handler, which
        # sleeps in steps of up to 100 ms: two of our own threads must never wait that way.
        self._write_lock = threading.Lock()
        self._writer: int | None = None  # thread holding the write lock
        self._closed = False

    # --- connections ------------------------------------------------------------------

    def connect(self) -> sqlite3.Connection:
        """A new connection with rota's settings (WAL, synchronous, busy timeout)."""
        try:
            conn = sqlite3.connect(
                self.path,
                isolation_level=None,
                check_same_thread=False,
                timeout=self.busy_ms / 1000,
            )
        except sqlite3.Error as exc:
            raise DatabaseUnavailableError(f"cannot open SQLite file {self.path!r}: {exc}") from exc
        conn.row_factory = sqlite3.Row
        conn.execute(f"PRAGMA busy_timeout = {self.busy_ms}")
        self._use_wal(conn)
        conn.execute(f"PRAGMA synchronous = {self.synchronous}")
        conn.execute("PRAGMA foreign_keys = ON")  # steps cascade with their job
        return conn

    def _use_wal(self, conn: sqlite3.Connection) -> None:
        """Put the file in WAL mode, once: it stays so for every later connection.

        SQLite does not call the busy handler for this switch: a second process opening a
        new file at the same moment gets "database is locked" at once, so wait here, within
        the same busy timeout as any other lock."""
        deadline = time.monotonic() + self.busy_ms / 1000
        pause = 0.001
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if str(mode).lower() != "wal":
                    conn.execute("PRAGMA journal_mode = WAL")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() >= deadline:
                    conn.close()
                    raise translate(exc) from exc
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    @contextlib.contextmanager
    def _pooled(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise DatabaseUnavailableError("the database is closed")
        try:
            conn = self._idle.get_nowait()
        except queue.Empty:
            conn = self.connect()
            with self._lock:
                self._all.append(conn)
        try:
            yield conn
        finally:
            if conn.in_transaction:  # never hand back a connection mid-transaction
                conn.rollback()
            self._idle.put(conn)

    def connection_of(self, conn: object) -> sqlite3.Connection:
        conn = plain_connection(conn)  # a SQLAlchemy session, Django's connection
        if not isinstance(conn, sqlite3.Connection):
            raise ConfigurationError(
                f"conn= must be a sqlite3.Connection for a SQLite app, not {type(conn).__name__}"
            )
        return conn

    # --- the seam -----------------------------------------------------------------------

    def query(
        self, name: str, params: Params | None = None, conn: sqlite3.Connection | None = None
    ) -> list[Row]:
        with self.read(conn) as session:
            return session.all(name, params)

    def execute(
        self, name: str, params: Params | None = None, conn: sqlite3.Connection | None = None
    ) -> list[Row]:
        with self.write(conn) as session:
            return session.all(name, params)

    @contextlib.contextmanager
    def read(self, conn: sqlite3.Connection | None = None) -> Iterator[SQLiteSession]:
        if conn is not None:
            yield self._joined(conn)
            return
        with self._pooled() as own:
            try:
                yield SQLiteSession(own.cursor())
            except sqlite3.OperationalError as exc:
                raise translate(exc) from exc

    @contextlib.contextmanager
    def write(self, conn: sqlite3.Connection | None = None) -> Iterator[SQLiteSession]:
        """BEGIN IMMEDIATE takes the write lock up front, so two writers queue on
        busy_timeout instead of failing with SQLITE_BUSY when a read upgrades."""
        if conn is not None:
            yield self._joined(conn)
            return
        if self._writer == threading.get_ident():
            # The same thread already holds the write transaction (app.transaction() or
            # ctx.transaction()); a second connection would wait on it forever.
            raise ConfigurationError(
                "this thread is inside a rota transaction on SQLite: pass conn= (the "
                "transaction's connection) to rota calls made inside it"
            )
        with self._write_lock, self._pooled() as own:
            self._writer = threading.get_ident()
            try:
                self._begin_immediate(own)
                cursor = own.cursor()
                yield SQLiteSession(cursor)
                cursor.close()  # finish any unread RETURNING rows before COMMIT
                own.execute("COMMIT")
            except sqlite3.OperationalError as exc:
                if own.in_transaction:
                    own.rollback()
                raise translate(exc) from exc
            except BaseException:
                if own.in_transaction:
                    own.rollback()
                raise
            finally:
                self._writer = None

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        """Take the write lock. Another process holding it is waited for in steps of at
        most WRITE_WAIT_STEP, up to the busy timeout: SQLite's own busy handler sleeps 1,
        2, 5, 10, 15, 20, 25 ... 100 ms between tries, and two worker processes passing
        the lock back and forth lost much of each wait to the last of those sleeps. (The
        connection's busy timeout is lifted for the tries and put back: its other
        statements keep SQLite's handler.)"""
        conn.execute("PRAGMA busy_timeout = 0")
        try:
            deadline = None
            pause = WRITE_WAIT_FIRST
            while True:
                try:
                    conn.execute("BEGIN IMMEDIATE")
                    return
                except sqlite3.OperationalError as exc:
                    if not _busy(exc):
                        raise
                    now = time.monotonic()
                    if deadline is None:
                        deadline = now + self.busy_ms / 1000
                    if now >= deadline:
                        raise
                time.sleep(min(pause, deadline - now))
                pause = min(pause * 2, WRITE_WAIT_STEP)
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self.busy_ms}")

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[SQLiteSession]:
        # A deferred transaction that only reads holds one WAL snapshot and no lock.
        with self._pooled() as own:
            own.execute("BEGIN")
            try:
                yield SQLiteSession(own.cursor())
            except sqlite3.OperationalError as exc:
                raise translate(exc) from exc
            finally:
                if own.in_transaction:
                    own.execute("COMMIT")

    def _joined(self, conn: sqlite3.Connection) -> SQLiteSession:
        # The caller's transaction: join it, and let the caller commit or roll back.
        cursor = self.connection_of(conn).cursor()
        cursor.row_factory = sqlite3.Row
        return SQLiteSession(cursor)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A connection in a write transaction, committed when the block exits cleanly.

        It holds the database's write lock for the whole block: keep the block short."""
        with self.write() as session:
            yield session.connection

    def close(self) -> None:
        self._closed = True
        with self._lock:
            for conn in self._all:
                with contextlib.suppress(sqlite3.Error):
                    conn.close()
            self._all.clear()


def _busy(exc: sqlite3.OperationalError) -> bool:
    """Another connection holds the lock (SQLITE_BUSY: "database is locked")."""
    code = getattr(exc, "sqlite_errorcode", None)
    return (code is not None and code & 0xFF == sqlite3.SQLITE_BUSY) or "locked" in str(exc)


def translate(exc: sqlite3.OperationalError) -> Exception:
    """rota's error for what SQLite said, when it means something to the user."""
    text = str(exc)
    if "no such table" in text:
        return SchemaError(f"{text}: the database has no rota schema; run `rota migrate`")
    if "unable to open" in text or "disk I/O" in text:
        return DatabaseUnavailableError(text)
    return exc


__all__ = ["QUERIES", "SCRIPTS", "SQLiteCodec", "SQLiteDatabase", "SQLiteSession", "translate"]
