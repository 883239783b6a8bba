"""Storage of processing windows and circuit breakers, written once over the dialect seam
(SQL: drivers/<dialect>/queries/hold.sql). The holds they put on queues are the engine's
(`Driver.queue_hold_put` / `queue_hold_drop`)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rota.drivers.base import Driver
from rota.drivers.database import Row
from rota.ops.hold_model import BreakerRecord, WindowRecord


class HoldStore:
    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    # --- processing windows ---------------------------------------------------------------

    def window_put(self, queue: str, windows_json: str, tz: str) -> None:
        self._db.execute("window_put", {"queue": queue, "windows": windows_json, "tz": tz})

    def window_drop(self, queue: str) -> bool:
        return bool(self._db.execute("window_drop", {"queue": queue}))

    def window_list(self) -> list[WindowRecord]:
        c = self._db.codec
        return [
            WindowRecord(r["queue"], r["windows"], r["tz"], c.time(r["updated_at"]))
            for r in self._db.query("window_list")
        ]

    # --- circuit breakers -----------------------------------------------------------------

    def _breaker(self, row: Row) -> BreakerRecord:
        c = self._db.codec
        return BreakerRecord(
            queue=row["queue"],
            threshold=row["threshold"],
            min_attempts=row["min_attempts"],
            window=row["window_s"],
            cooldown=row["cooldown_s"],
            state=row["state"],
            changed_at=c.time(row["changed_at"]),
            trips=row["trips"],
            attempts=row["attempts"],
            failures=row["failures"],
            trial_job_id=row["trial_job_id"],
            trial_attempt=row["trial_attempt"],
            saved_rate=c.flag(row["saved_rate"]),
            saved_rate_limit=row["saved_rate_limit"],
            saved_rate_period=row["saved_rate_period"],
        )

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
        self._db.execute("breaker_configure", params)

    def breaker_drop(self, queue: str) -> bool:
        return bool(self._db.execute("breaker_drop", {"queue": queue}))

    def breaker_list(self, queue: str | None = None) -> list[BreakerRecord]:
        return [self._breaker(r) for r in self._db.query("breaker_list", {"queue": queue})]

    def breaker_save(self, record: BreakerRecord) -> None:
        params = {
            "queue": record.queue,
            "state": record.state,
            "changed_at": self._db.codec.time_param(record.changed_at),
            "trips": record.trips,
            "attempts": record.attempts,
            "failures": record.failures,
            "trial_job_id": record.trial_job_id,
            "trial_attempt": record.trial_attempt,
            "saved_rate": record.saved_rate,
            "saved_rate_limit": record.saved_rate_limit,
            "saved_rate_period": record.saved_rate_period,
        }
        self._db.execute("breaker_save", params)

    def breaker_attempts(
        self, queue: str, since: datetime, failed: Sequence[str]
    ) -> tuple[int, int]:
        """(finished attempts, failed ones) of the queue's attempts started since `since`."""
        c = self._db.codec
        params = {"queue": queue, "since": c.time_param(since), "failed": c.array(list(failed))}
        row = self._db.query("breaker_attempts", params)[0]
        return int(row["attempts"]), int(row["failures"])

    def breaker_trial(self, queue: str, since: datetime) -> tuple[int, int] | None:
        """(job id, attempt) of the first job of the queue started since `since`."""
        params = {"queue": queue, "since": self._db.codec.time_param(since)}
        rows = self._db.query("breaker_trial", params)
        return (rows[0]["id"], rows[0]["attempt"]) if rows else None
