"""Values of routing: a worker's advertisement and the waiting jobs no live worker can run."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class WorkerAdvert:
    """A live worker that advertised capabilities, and the queues it serves."""

    worker_id: str
    queues: tuple[str, ...]
    capabilities: tuple[str, ...]
    started_at: datetime
    seen_at: datetime
    expires_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "worker_id": self.worker_id,
            "queues": list(self.queues),
            "capabilities": list(self.capabilities),
            "started_at": self.started_at.isoformat(),
            "seen_at": self.seen_at.isoformat(),
            "expires_at": self.expires_at.isoformat(),
        }


@dataclass(frozen=True)
class Unroutable:
    """Waiting jobs of one queue and one set of requirements that no live worker serving
    the queue covers: they wait until such a worker starts (or the job is changed)."""

    queue: str
    requires: tuple[str, ...]
    waiting: int
    oldest_job_id: int
    oldest_created_at: datetime

    def to_json(self) -> dict[str, Any]:
        return {
            "queue": self.queue,
            "requires": list(self.requires),
            "waiting": self.waiting,
            "oldest_job_id": self.oldest_job_id,
            "oldest_created_at": self.oldest_created_at.isoformat(),
        }
