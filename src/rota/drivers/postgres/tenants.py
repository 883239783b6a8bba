"""Tenant storage on PostgreSQL: fair queues and tenant caps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rota.tenants.model import TenantRecord

if TYPE_CHECKING:
    from rota.drivers.postgres.driver import PostgresDriver


class PostgresTenantStore:
    def __init__(self, driver: PostgresDriver) -> None:
        self._d = driver

    def queue_list_fair(self) -> list[str]:
        return [r["name"] for r in self._d._rows("queue_list_fair")]

    def queue_set_fair(self, queue: str, fair: bool) -> None:
        self._d._rows("queue_set_fair", {"queue": queue, "fair": fair})

    def tenant_configure(self, name: str, max_running: int | None) -> None:
        self._d._rows("tenant_configure", {"name": name, "max_running": max_running})

    def tenant_list(self, name: str | None = None) -> list[TenantRecord]:
        return [
            TenantRecord(r["name"], r["max_running"], r["running"], r["waiting"])
            for r in self._d._rows("tenant_list", {"name": name})
        ]
