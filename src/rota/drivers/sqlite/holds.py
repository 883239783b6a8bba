"""Queue holds, processing windows and circuit breakers on SQLite. Each change of a hold
runs in one write transaction (BEGIN IMMEDIATE) that also sets `paused` from the holds."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.ops.hold_model import BreakerRecord, HoldSource, QueueHold, WindowRecord

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


def _time(value: float | None) -> datetime | None:
    return None if value is None else datetime.fromtimestamp(value, UTC)


def _epoch(value: datetime | None) -> float | None:
    return None if value is None else value.timestamp()


def breaker_record(row: sqlite3.Row) -> BreakerRecord:
    return BreakerRecord(
        queue=row["queue"],
        threshold=row["threshold"],
        min_attempts=row["min_attempts"],
        window=row["window_s"],
        cooldown=row["cooldown_s"],
        state=row["state"],
        changed_at=_time(row["changed_at"]),
        trips=row["trips"],
        attempts=row["attempts"],
        failures=row["failures"],
        trial_job_id=row["trial_job_id"],
        trial_attempt=row["trial_attempt"],
        saved_rate=bool(row["saved_rate"]),
        saved_rate_limit=row["saved_rate_limit"],
        saved_rate_period=row["saved_rate_period"],
    )


class SQLiteHoldStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def _change(self, name: str, params: dict[str, Any]) -> tuple[bool, bool]:
        """Apply one hold change; (paused before, paused after)."""
        with self._d._write() as db:
            before = bool(db.execute(_Q["hold_lock_queue"], params).fetchone()[0])
            db.execute(_Q["hold_adopt"], params)
            db.execute(_Q[name], params)
            after = bool(db.execute(_Q["hold_sync"], params).fetchone()[0])
        return before, after

    def hold_put(self, queue: str, source: HoldSource, reason: str, until: datetime | None) -> bool:
        params = {"queue": queue, "source": source, "reason": reason, "until": _epoch(until)}
        before, after = self._change("hold_put", params)
        return after and not before

    def hold_drop(self, queue: str, source: HoldSource) -> bool:
        before, after = self._change("hold_drop", {"queue": queue, "source": source})
        return before and not after

    def hold_list(self, queue: str | None = None) -> list[QueueHold]:
        return [
            QueueHold(
                queue=r["queue"],
                source=r["source"],
                reason=r["reason"],
                since=datetime.fromtimestamp(r["since"], UTC),
                until=_time(r["until"]),
            )
            for r in self._d._read("hold_list", {"queue": queue})
        ]

    def window_put(self, queue: str, windows_json: str, tz: str) -> None:
        with self._d._write() as db:
            db.execute(_Q["window_put"], {"queue": queue, "windows": windows_json, "tz": tz})

    def window_drop(self, queue: str) -> bool:
        with self._d._write() as db:
            return db.execute(_Q["window_drop"], {"queue": queue}).fetchone() is not None

    def window_list(self) -> list[WindowRecord]:
        return [
            WindowRecord(r["queue"], r["windows"], r["tz"], _time(r["updated_at"]))
            for r in self._d._read("window_list")
        ]

    def breaker_configure(
        self, queue: str, threshold: float, min_attempts: int, window: float, cooldown: float
    ) -> None:
        params = {
            "queue": queue,
            "threshold": threshold,
            "min_attempts": min_attempts,
            "window": window,
            "cooldown": cooldown,
        }
        with self._d._write() as db:
            db.execute(_Q["breaker_configure"], params)

    def breaker_drop(self, queue: str) -> bool:
        with self._d._write() as db:
            return db.execute(_Q["breaker_drop"], {"queue": queue}).fetchone() is not None

    def breaker_list(self, queue: str | None = None) -> list[BreakerRecord]:
        return [breaker_record(r) for r in self._d._read("breaker_list", {"queue": queue})]

    def breaker_save(self, record: BreakerRecord) -> None:
        params = {
            "queue": record.queue,
            "state": record.state,
            "changed_at": _epoch(record.changed_at),
            "trips": record.trips,
            "attempts": record.attempts,
            "failures": record.failures,
            "trial_job_id": record.trial_job_id,
            "trial_attempt": record.trial_attempt,
            "saved_rate": 1 if record.saved_rate else 0,
            "saved_rate_limit": record.saved_rate_limit,
            "saved_rate_period": record.saved_rate_period,
        }
        with self._d._write() as db:
            db.execute(_Q["breaker_save"], params)

    def breaker_attempts(
        self, queue: str, since: datetime, failed: Sequence[str]
    ) -> tuple[int, int]:
        params = {"queue": queue, "since": since.timestamp(), "failed": json.dumps(list(failed))}
        row = self._d._read("breaker_attempts", params)[0]
        return int(row["attempts"]), int(row["failures"])

    def breaker_trial(self, queue: str, since: datetime) -> tuple[int, int] | None:
        rows = self._d._read("breaker_trial", {"queue": queue, "since": since.timestamp()})
        return (rows[0]["id"], rows[0]["attempt"]) if rows else None
