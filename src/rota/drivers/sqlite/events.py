"""Event and subscription storage on SQLite."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.drivers.base import EventFilter, EventRecord, Subscription

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


def _event(row: sqlite3.Row, created: bool = True) -> EventRecord:
    return EventRecord(
        id=row["id"],
        name=row["name"],
        version=row["version"],
        payload=json.loads(row["payload"]),
        key=row["key"],
        published_at=datetime.fromtimestamp(row["published_at"], UTC),
        created=created,
    )


def _subscription(row: sqlite3.Row) -> Subscription:
    return Subscription(
        event=row["event"],
        task=row["task"],
        queue=row["queue"],
        priority=row["priority"],
        max_attempts=row["max_attempts"],
        created_at=datetime.fromtimestamp(row["created_at"], UTC),
    )


class SQLiteEventStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def insert(
        self, conn: Any, name: str, version: int, payload_json: str, key: str | None
    ) -> EventRecord:
        params = {"name": name, "version": version, "payload": payload_json, "key": key}
        with self._d._write(conn) as db:
            row = db.execute(_Q["event_insert"], params).fetchone()
            if row is not None:
                return _event(row)
            existing = db.execute(_Q["event_get_by_key"], {"key": key}).fetchone()
            assert existing is not None, "event key conflict without a holder"
            return _event(existing, created=False)

    def get(self, event_id: int) -> EventRecord | None:
        rows = self._d._read("event_get", {"id": event_id})
        return _event(rows[0]) if rows else None

    def search(self, where: EventFilter) -> list[EventRecord]:
        params = {
            "name": where.name,
            "after_id": where.after_id,
            "until_id": where.until_id,
            # Half a microsecond of slack: a time read back from a REAL (as a datetime,
            # in whole microseconds) must still match the event it came from.
            "since": None if where.since is None else where.since.timestamp() - 5e-7,
            "limit": where.limit,
        }
        return [_event(r) for r in self._d._read("event_list", params)]

    def subscriptions(self, conn: Any, event: str | None) -> list[Subscription]:
        if event is None:
            return [_subscription(r) for r in self._d._read("subscription_list")]
        if conn is None:
            rows = self._d._read("subscription_list_for", {"event": event})
        else:
            with self._d._write(conn) as db:
                rows = db.execute(_Q["subscription_list_for"], {"event": event}).fetchall()
        return [_subscription(r) for r in rows]

    def subscribe_many(self, rows: Sequence[Subscription], conn: Any = None) -> None:
        with self._d._write(conn) as db:
            for row in rows:
                db.execute(
                    _Q["subscription_upsert"],
                    {
                        "event": row.event,
                        "task": row.task,
                        "queue": row.queue,
                        "priority": row.priority,
                        "max_attempts": row.max_attempts,
                    },
                )

    def prune(self, age: float, limit: int) -> int:
        with self._d._write() as db:
            return len(db.execute(_Q["event_prune"], {"age": age, "limit": limit}).fetchall())

    def unsubscribe(self, event: str, task: str) -> bool:
        with self._d._write() as db:
            params = {"event": event, "task": task}
            return db.execute(_Q["subscription_delete"], params).fetchone() is not None
