"""Values of tenants: a tenant's cap and its current load."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class TenantRecord:
    """A tenant: its cap on running jobs (None: none) and its jobs running and waiting."""

    name: str
    max_running: int | None = None
    running: int = 0
    waiting: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "max_running": self.max_running,
            "running": self.running,
            "waiting": self.waiting,
        }
