"""Event and subscription storage, written once over the dialect seam (SQL:
drivers/<dialect>/queries/event.sql), and the records it exchanges."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from rota.drivers.base import Driver
from rota.drivers.database import Row


@dataclass(frozen=True)
class EventRecord:
    """A published event: a fact with a stable id and a schema version."""

    id: int
    name: str
    version: int
    payload: Any
    key: str | None
    published_at: datetime
    created: bool = True  # False: the key was published before; this is that event

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "name": self.name,
            "version": self.version,
            "payload": self.payload,
            "key": self.key,
            "published_at": self.published_at.isoformat(),
        }


@dataclass(frozen=True)
class Subscription:
    """A task that reacts to an event name, with the job policy its deliveries get."""

    event: str
    task: str
    queue: str
    priority: int
    max_attempts: int
    created_at: datetime | None = None


@dataclass(frozen=True)
class EventFilter:
    name: str | None = None
    after_id: int | None = None
    until_id: int | None = None
    since: datetime | None = None
    limit: int = 1000


class EventStore:
    """Events and subscriptions; `conn` joins the caller's transaction (a psycopg or
    sqlite3 connection, checked by the dialect)."""

    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def _event(self, row: Row, created: bool = True) -> EventRecord:
        c = self._db.codec
        return EventRecord(
            id=row["id"],
            name=row["name"],
            version=row["version"],
            payload=c.json(row["payload"]),
            key=row["key"],
            published_at=c.instant(row["published_at"]),
            created=created,
        )

    def _subscription(self, row: Row) -> Subscription:
        return Subscription(
            event=row["event"],
            task=row["task"],
            queue=row["queue"],
            priority=row["priority"],
            max_attempts=row["max_attempts"],
            created_at=self._db.codec.time(row["created_at"]),
        )

    def insert(
        self, conn: object, name: str, version: int, payload_json: str, key: str | None
    ) -> EventRecord:
        params = {"name": name, "version": version, "payload": payload_json, "key": key}
        with self._db.write(conn) as session:
            row = session.one("event_insert", params)
            if row is not None:
                return self._event(row)
            # The key was published before (a concurrent publisher waited on the unique
            # index until that one committed): that event is the answer.
            existing = session.one("event_get_by_key", {"key": key})
            assert existing is not None, "event key conflict without a holder"
            return self._event(existing, created=False)

    def get(self, event_id: int) -> EventRecord | None:
        rows = self._db.query("event_get", {"id": event_id})
        return self._event(rows[0]) if rows else None

    def search(self, where: EventFilter) -> list[EventRecord]:
        params = {
            "name": where.name,
            "after_id": where.after_id,
            "until_id": where.until_id,
            "since": self._db.codec.time_param(where.since),
            "limit": where.limit,
        }
        return [self._event(r) for r in self._db.query("event_list", params)]

    def subscriptions(self, conn: object, event: str | None) -> list[Subscription]:
        if event is None:
            return [self._subscription(r) for r in self._db.query("subscription_list")]
        rows = self._db.query("subscription_list_for", {"event": event}, conn)
        return [self._subscription(r) for r in rows]

    def subscribe_many(self, rows: Sequence[Subscription], conn: object = None) -> None:
        with self._db.write(conn) as session:
            for row in rows:
                session.count(
                    "subscription_upsert",
                    {
                        "event": row.event,
                        "task": row.task,
                        "queue": row.queue,
                        "priority": row.priority,
                        "max_attempts": row.max_attempts,
                    },
                )

    def unsubscribe(self, event: str, task: str) -> bool:
        return bool(self._db.execute("subscription_delete", {"event": event, "task": task}))

    def prune(self, age: float, limit: int) -> int:
        """Delete up to `limit` events published over `age` seconds ago."""
        return len(self._db.execute("event_prune", {"age": age, "limit": limit}))
