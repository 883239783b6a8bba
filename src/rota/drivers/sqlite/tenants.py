"""Tenant storage on SQLite: fair queues and tenant caps."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rota.drivers import queries
from rota.tenants.model import TenantRecord

if TYPE_CHECKING:
    from rota.drivers.sqlite.driver import SQLiteDriver

_Q = queries.load("sqlite")


class SQLiteTenantStore:
    def __init__(self, driver: SQLiteDriver) -> None:
        self._d = driver

    def queue_list_fair(self) -> list[str]:
        return [r["name"] for r in self._d._read("queue_list_fair")]

    def queue_set_fair(self, queue: str, fair: bool) -> None:
        with self._d._write() as db:
            db.execute(_Q["queue_set_fair"], {"queue": queue, "fair": int(fair)}).fetchall()

    def tenant_configure(self, name: str, max_running: int | None) -> None:
        with self._d._write() as db:
            db.execute(_Q["tenant_configure"], {"name": name, "max_running": max_running})

    def tenant_list(self, name: str | None = None) -> list[TenantRecord]:
        return [
            TenantRecord(r["name"], r["max_running"], r["running"], r["waiting"])
            for r in self._d._read("tenant_list", {"name": name})
        ]
