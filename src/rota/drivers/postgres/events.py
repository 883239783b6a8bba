"""Event and subscription storage on PostgreSQL."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.drivers.base import EventFilter, EventRecord, Subscription

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver

_Q = queries.load("postgres")


def _event(row: dict[str, Any], created: bool = True) -> EventRecord:
    return EventRecord(
        id=row["id"],
        name=row["name"],
        version=row["version"],
        payload=row["payload"],
        key=row["key"],
        published_at=row["published_at"],
        created=created,
    )


def _subscription(row: dict[str, Any]) -> Subscription:
    return Subscription(
        event=row["event"],
        task=row["task"],
        queue=row["queue"],
        priority=row["priority"],
        max_attempts=row["max_attempts"],
        created_at=row["created_at"],
    )


class PostgresEventStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def insert(
        self, conn: Any, name: str, version: int, payload_json: str, key: str | None
    ) -> EventRecord:
        params = {"name": name, "version": version, "payload": payload_json, "key": key}
        with self._d._tx(conn) as cur:
            cur.execute(_Q["event_insert"], params)
            row = cur.fetchone()
            if row is not None:
                return _event(row)
            # The key was published before (a concurrent publisher waited on the unique
            # index until that one committed): that event is the answer.
            cur.execute(_Q["event_get_by_key"], {"key": key})
            existing = cur.fetchone()
            assert existing is not None, "event key conflict without a holder"
            return _event(existing, created=False)

    def get(self, event_id: int) -> EventRecord | None:
        rows = self._d._rows("event_get", {"id": event_id})
        return _event(rows[0]) if rows else None

    def search(self, where: EventFilter) -> list[EventRecord]:
        params = {
            "name": where.name,
            "after_id": where.after_id,
            "until_id": where.until_id,
            "since": where.since,
            "limit": where.limit,
        }
        return [_event(r) for r in self._d._rows("event_list", params)]

    def subscriptions(self, conn: Any, event: str | None) -> list[Subscription]:
        if event is None:
            return [_subscription(r) for r in self._d._rows("subscription_list")]
        with self._d._tx(conn) as cur:
            cur.execute(_Q["subscription_list_for"], {"event": event})
            return [_subscription(r) for r in cur.fetchall()]

    def subscribe_many(self, rows: Sequence[Subscription], conn: Any = None) -> None:
        with self._d._tx(conn) as cur:
            for row in rows:
                cur.execute(
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
        return len(self._d._rows("event_prune", {"age": age, "limit": limit}))

    def unsubscribe(self, event: str, task: str) -> bool:
        return bool(self._d._rows("subscription_delete", {"event": event, "task": task}))
