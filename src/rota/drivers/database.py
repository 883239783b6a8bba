"""The dialect seam: a typed handle on one database that runs *named* queries (never SQL
text) on pooled connections, joins a caller's transaction, and encodes and decodes the
values that differ between dialects (times, JSON, booleans, lists). Every store above it,
the engine's and each feature's, is written once against this protocol; a dialect brings
only its SQL files, its migrations and a class that implements it."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol, TypeVar

from rota.drivers.url import DatabaseURL

ConnT = TypeVar("ConnT")
ConnT_co = TypeVar("ConnT_co", covariant=True)

# Named parameters of one query: the same names in both dialects' SQL.
Params = Mapping[str, Any]


class Row(Protocol):
    """One result row: columns by name (a dict on PostgreSQL, sqlite3.Row on SQLite).
    Values come raw from the dialect: decode them with the database's Codec."""

    def __getitem__(self, key: str, /) -> Any: ...

    def keys(self) -> Any: ...


class Session(Protocol[ConnT_co]):
    """Named queries on one connection: inside a transaction (`Database.write`), or not."""

    @property
    def connection(self) -> ConnT_co:
        """The connection itself, for joining a nested store call to this transaction."""
        ...

    def all(self, name: str, params: Params | None = None) -> list[Row]: ...

    def one(self, name: str, params: Params | None = None) -> Row | None: ...

    def value(self, name: str, params: Params | None = None) -> Any:
        """The first column of the first row (None when there is no row)."""
        ...

    def count(self, name: str, params: Params | None = None) -> int:
        """Run a statement and return how many rows it changed."""
        ...

    def many(self, name: str, params: Sequence[Params]) -> None:
        """Run one statement once per parameter set (pipelined where the dialect can)."""
        ...


class Codec(Protocol):
    """How values cross the seam. PostgreSQL hands back native types; SQLite stores times
    as Unix seconds, JSON as text, booleans as 0/1 and lists as JSON arrays."""

    def time(self, value: Any) -> datetime | None:
        """A stored time as an aware UTC datetime (None stays None)."""
        ...

    def instant(self, value: Any) -> datetime:
        """A stored time that is never NULL (a NOT NULL column)."""
        ...

    def json_time(self, value: Any) -> datetime | None:
        """A time written by SQL into a JSON document (a history entry): an ISO string
        on PostgreSQL, Unix seconds on SQLite."""
        ...

    def time_param(self, value: datetime | None) -> Any:
        """An aware datetime as a query parameter."""
        ...

    def json(self, value: Any) -> Any:
        """A stored JSON value as Python objects (None stays None)."""
        ...

    def flag(self, value: Any) -> bool: ...

    def array(self, values: Sequence[Any] | None) -> Any:
        """A list parameter: a PostgreSQL array, or a JSON array on SQLite."""
        ...

    def columns(
        self, name: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        """Many rows as parameters of one statement. PostgreSQL gets one array per column,
        named `<name>_<column>` (read with unnest); SQLite gets one JSON array of objects
        named `<name>` (read with json_each)."""
        ...

    def positions(self, row: Row) -> dict[str, Any]:
        """For each column of rows shaped like `row` (one statement's), the key that reads
        it fastest: its index in an sqlite3.Row (a lookup by name compares the names), its
        name in PostgreSQL's dict rows."""
        ...

    def time_decoder(self) -> Callable[[Any], datetime | None]:
        """`time` for one batch of rows: SQLite decodes each distinct value once (a
        claim's jobs share their start and lease times, often their enqueue times too);
        PostgreSQL's are datetimes already."""
        ...

    def completions(
        self, name: str, names: Sequence[str], rows: Sequence[Sequence[Any]]
    ) -> dict[str, Any]:
        """Attempt outcomes (columns `id`, `token`, `state` and what else to write) as
        parameters of job_complete_many and the claims: PostgreSQL gets `columns`; SQLite
        sends a completed attempt with nothing else to write (every other column None or
        False) as one entry of `p`, a JSON object of lease tokens by id, and the rest as
        `columns` (parsing each field of a JSON object was most of a completion's cost)."""
        ...

    def row(self, name: str, names: Sequence[str], values: Sequence[Any]) -> dict[str, Any]:
        """One row as parameters of a statement that takes one: PostgreSQL gets a scalar per
        column, named `<name>_<column>` (no array to build or unpack); SQLite gets the same
        JSON array of one object as `columns` (read with json_each)."""
        ...


class Database(Protocol[ConnT]):
    """One database of one dialect. Thread-safe; every method blocks."""

    dialect: str
    url: DatabaseURL

    @property
    def codec(self) -> Codec: ...

    def query(
        self, name: str, params: Params | None = None, conn: ConnT | None = None
    ) -> list[Row]:
        """A read: no transaction of its own, no write lock (or in the caller's `conn`)."""
        ...

    def execute(
        self, name: str, params: Params | None = None, conn: ConnT | None = None
    ) -> list[Row]:
        """One write statement as its own transaction (or in the caller's `conn`), with the
        rows it returns."""
        ...

    def read(self, conn: ConnT | None = None) -> AbstractContextManager[Session[ConnT]]:
        """Several reads on one connection (no transaction of its own)."""
        ...

    def write(self, conn: ConnT | None = None) -> AbstractContextManager[Session[ConnT]]:
        """One transaction for several statements, committed when the block exits cleanly
        and rolled back on an error; with `conn`, the caller's transaction instead."""
        ...

    def snapshot(self) -> AbstractContextManager[Session[ConnT]]:
        """Several reads that see one consistent state of the database (a read-only
        REPEATABLE READ transaction on PostgreSQL; one read transaction on SQLite)."""
        ...

    def transaction(self) -> AbstractContextManager[ConnT]:
        """A connection in a transaction for the application's own writes (the same
        transaction as an enqueue passed `conn=`)."""
        ...

    def connection_of(self, conn: object) -> ConnT:
        """`conn` as this dialect's connection type, or a ConfigurationError naming it."""
        ...

    def close(self) -> None: ...
