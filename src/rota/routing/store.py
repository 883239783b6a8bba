"""RoutingStore: what the drivers provide for routing (`driver.routing`;
drivers/<dialect>/routing.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from rota.routing.model import Unroutable, WorkerAdvert


class RoutingStore(Protocol):
    def worker_advertise(
        self, worker_id: str, queues: Sequence[str], capabilities: Sequence[str], ttl: float
    ) -> None:
        """Record (or renew) a worker's capabilities for `ttl` seconds."""
        ...

    def worker_list(self) -> list[WorkerAdvert]:
        """Workers whose advertisement has not expired."""
        ...

    def worker_retire(self, worker_id: str) -> None:
        """Forget a stopping worker's advertisement at once."""
        ...

    def job_unroutable(self, queue: str | None, limit: int) -> list[Unroutable]:
        """Waiting jobs with requirements that no live worker of their queue covers,
        grouped by queue and requirements."""
        ...
