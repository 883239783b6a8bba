"""Tenant storage, written once over the dialect seam: fair queues and tenant caps
(SQL: drivers/<dialect>/queries/tenant.sql)."""

from __future__ import annotations

from rota.drivers.base import Driver
from rota.tenants.model import TenantRecord


class TenantStore:
    def __init__(self, driver: Driver) -> None:
        self._db = driver.database

    def queue_list_fair(self) -> list[str]:
        return [r["name"] for r in self._db.query("queue_list_fair")]

    def queue_set_fair(self, queue: str, fair: bool) -> None:
        self._db.execute("queue_set_fair", {"queue": queue, "fair": fair})

    def tenant_configure(self, name: str, max_running: int | None) -> None:
        self._db.execute("tenant_configure", {"name": name, "max_running": max_running})

    def tenant_list(self, name: str | None = None) -> list[TenantRecord]:
        return [
            TenantRecord(r["name"], r["max_running"], r["running"], r["waiting"])
            for r in self._db.query("tenant_list", {"name": name})
        ]
