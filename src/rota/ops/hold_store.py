"""HoldStore: what the drivers provide for queue holds, processing windows and circuit
breakers (`driver.holds`; drivers/<dialect>/holds.py)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Protocol

from rota.ops.hold_model import BreakerRecord, HoldSource, QueueHold, WindowRecord


class HoldStore(Protocol):
    def breaker_attempts(
        self, queue: str, since: datetime, failed: Sequence[str]
    ) -> tuple[int, int]:
        """(finished attempts, failed ones) of the queue's attempts started since `since`."""
        ...

    def breaker_configure(
        self, queue: str, threshold: float, min_attempts: int, window: float, cooldown: float
    ) -> None: ...

    def breaker_drop(self, queue: str) -> bool: ...

    def breaker_list(self, queue: str | None = None) -> list[BreakerRecord]: ...

    def breaker_save(self, record: BreakerRecord) -> None: ...

    def breaker_trial(self, queue: str, since: datetime) -> tuple[int, int] | None:
        """(job id, attempt) of the first job of the queue started since `since`."""
        ...

    def hold_drop(self, queue: str, source: HoldSource) -> bool:
        """Remove a hold; True when that resumed the queue (it had no other hold)."""
        ...

    def hold_list(self, queue: str | None = None) -> list[QueueHold]: ...

    def hold_put(self, queue: str, source: HoldSource, reason: str, until: datetime | None) -> bool:
        """Add or update a hold; True when that paused the queue (it had none)."""
        ...

    def window_drop(self, queue: str) -> bool: ...

    def window_list(self) -> list[WindowRecord]: ...

    def window_put(self, queue: str, windows_json: str, tz: str) -> None: ...
