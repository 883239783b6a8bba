"""Queue holds, processing windows and circuit breakers on PostgreSQL. Every change of
a hold locks the queue's row first and then sets `paused` from the holds, so an operator
and the leader changing holds at once cannot leave `paused` disagreeing with them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rota.drivers import queries
from rota.ops.hold_model import BreakerRecord, HoldSource, QueueHold, WindowRecord

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver

_Q = queries.load("postgres")


def breaker_record(row: dict[str, Any]) -> BreakerRecord:
    return BreakerRecord(
        queue=row["queue"],
        threshold=row["threshold"],
        min_attempts=row["min_attempts"],
        window=row["window_s"],
        cooldown=row["cooldown_s"],
        state=row["state"],
        changed_at=row["changed_at"],
        trips=row["trips"],
        attempts=row["attempts"],
        failures=row["failures"],
        trial_job_id=row["trial_job_id"],
        trial_attempt=row["trial_attempt"],
        saved_rate=bool(row["saved_rate"]),
        saved_rate_limit=row["saved_rate_limit"],
        saved_rate_period=row["saved_rate_period"],
    )


class PostgresHoldStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def _change(self, name: str, params: dict[str, Any]) -> tuple[bool, bool]:
        """Apply one hold change; (paused before, paused after)."""
        with self._d._tx() as cur:
            cur.execute(_Q["hold_lock_queue"], params)
            before = bool(cur.fetchone()["paused"])  # type: ignore[index]
            cur.execute(_Q["hold_adopt"], params)
            cur.execute(_Q[name], params)
            cur.execute(_Q["hold_sync"], params)
            after = bool(cur.fetchone()["paused"])  # type: ignore[index]
        return before, after

    def hold_put(self, queue: str, source: HoldSource, reason: str, until: datetime | None) -> bool:
        params = {"queue": queue, "source": source, "reason": reason, "until": until}
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
                since=r["since"],
                until=r["until"],
            )
            for r in self._d._rows("hold_list", {"queue": queue})
        ]

    def window_put(self, queue: str, windows_json: str, tz: str) -> None:
        self._d._rows("window_put", {"queue": queue, "windows": windows_json, "tz": tz})

    def window_drop(self, queue: str) -> bool:
        return bool(self._d._rows("window_drop", {"queue": queue}))

    def window_list(self) -> list[WindowRecord]:
        return [
            WindowRecord(r["queue"], r["windows"], r["tz"], r["updated_at"])
            for r in self._d._rows("window_list")
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
        self._d._rows("breaker_configure", params)

    def breaker_drop(self, queue: str) -> bool:
        return bool(self._d._rows("breaker_drop", {"queue": queue}))

    def breaker_list(self, queue: str | None = None) -> list[BreakerRecord]:
        return [breaker_record(r) for r in self._d._rows("breaker_list", {"queue": queue})]

    def breaker_save(self, record: BreakerRecord) -> None:
        self._d._rows("breaker_save", _state_params(record))

    def breaker_attempts(
        self, queue: str, since: datetime, failed: Sequence[str]
    ) -> tuple[int, int]:
        params = {"queue": queue, "since": since, "failed": list(failed)}
        row = self._d._rows("breaker_attempts", params)[0]
        return int(row["attempts"]), int(row["failures"])

    def breaker_trial(self, queue: str, since: datetime) -> tuple[int, int] | None:
        rows = self._d._rows("breaker_trial", {"queue": queue, "since": since})
        return (rows[0]["id"], rows[0]["attempt"]) if rows else None


def _state_params(record: BreakerRecord) -> dict[str, Any]:
    return {
        "queue": record.queue,
        "state": record.state,
        "changed_at": record.changed_at,
        "trips": record.trips,
        "attempts": record.attempts,
        "failures": record.failures,
        "trial_job_id": record.trial_job_id,
        "trial_attempt": record.trial_attempt,
        "saved_rate": record.saved_rate,
        "saved_rate_limit": record.saved_rate_limit,
        "saved_rate_period": record.saved_rate_period,
    }
