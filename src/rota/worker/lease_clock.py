"""The local lease clock (self-fencing): when each job's lease was last confirmed, on this
worker's monotonic clock. A lease the database renewed at a statement sent at time t lasts
at least until t + lease there, so a job not confirmed for `fence_after` (the lease less a
margin) is stopped here before the database can give it to another worker, even while
the database cannot be reached to say so. Durations only: no wall clocks compared."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterable


class LeaseClock:
    def __init__(self, fence_after: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.fence_after = fence_after
        self.clock = clock
        self._confirmed: dict[int, float] = {}

    def confirmed(self, job_ids: Iterable[int], sent_at: float) -> None:
        """The statement sent at `sent_at` (a claim or a renewal) confirmed these leases:
        the database set them to run out no earlier than `sent_at` + lease."""
        for job_id in job_ids:
            if self._confirmed.get(job_id, -1.0) < sent_at:
                self._confirmed[job_id] = sent_at

    def expire(self, job_ids: Iterable[int]) -> None:
        """Treat these leases as gone now (the database may hand the jobs on at once)."""
        for job_id in job_ids:
            self._confirmed[job_id] = -math.inf

    def forget(self, job_id: int) -> None:
        self._confirmed.pop(job_id, None)

    def deadline(self, job_id: int) -> float | None:
        """When this worker stops the job unless its lease is confirmed again."""
        at = self._confirmed.get(job_id)
        return None if at is None else at + self.fence_after

    def late(self, sent_at: float) -> bool:
        """A lease confirmed at `sent_at` is already past its local deadline."""
        return self.clock() >= sent_at + self.fence_after

    def expired(self) -> list[int]:
        """Jobs past their local deadline, oldest confirmation first."""
        limit = self.clock() - self.fence_after
        return sorted((j for j, at in self._confirmed.items() if at <= limit), key=self._key)

    def next_deadline(self) -> float | None:
        if not self._confirmed:
            return None
        return min(self._confirmed.values()) + self.fence_after

    def oldest_age(self) -> float | None:
        """Seconds since the least recently confirmed lease this worker holds."""
        if not self._confirmed:
            return None
        return self.clock() - min(self._confirmed.values())

    def _key(self, job_id: int) -> float:
        return self._confirmed[job_id]

    def __len__(self) -> int:
        return len(self._confirmed)
