"""TenantStore: what the drivers provide for tenants (`driver.tenants`;
drivers/<dialect>/tenants.py)."""

from __future__ import annotations

from typing import Protocol

from rota.tenants.model import TenantRecord


class TenantStore(Protocol):
    def queue_list_fair(self) -> list[str]: ...

    def queue_set_fair(self, queue: str, fair: bool) -> None: ...

    def tenant_configure(self, name: str, max_running: int | None) -> None: ...

    def tenant_list(self, name: str | None = None) -> list[TenantRecord]: ...
