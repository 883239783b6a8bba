"""`app.tenants`: mark queues fair by tenant, cap a tenant's running jobs, and see each
tenant's load."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from rota.errors import ArgumentsError
from rota.labels import check_queue_name
from rota.tenants.model import TenantRecord
from rota.tenants.store import TenantStore

if TYPE_CHECKING:
    from rota.app import App


def check_cap(value: object) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 1_000_000:
        raise ArgumentsError(
            f"max_running must be an integer from 1 to 1000000 (or None: no cap), not {value!r}"
        )
    return value


class Tenants:
    """`app.tenants.set_fair("reports")`, `app.tenants.configure("acme", max_running=5)`."""

    def __init__(self, app: App) -> None:
        self._app = app

    @property
    def store(self) -> TenantStore:
        return TenantStore(self._app.driver)

    def set_fair(self, queue: str, fair: bool = True) -> None:
        """Make claims of `queue` fair by tenant (or, with False, plain again): each claim
        tops up the tenants with the fewest running jobs first, and tenant caps apply.
        Fair claims take the queue's lock like limited queues do; workers see the change
        on their next claim."""
        check_queue_name(queue, ArgumentsError)
        if not isinstance(fair, bool):
            raise ArgumentsError("fair must be True or False")
        self.store.queue_set_fair(queue, fair)

    def fair_queues(self) -> builtins.list[str]:
        return self.store.queue_list_fair()

    def configure(self, name: str, *, max_running: int | None) -> TenantRecord:
        """Cap how many jobs of tenant `name` run at once, over all fair queues and
        workers (None removes the cap)."""
        check_queue_name(name, ArgumentsError)
        self.store.tenant_configure(name, check_cap(max_running))
        return self.get(name)

    def get(self, name: str) -> TenantRecord:
        check_queue_name(name, ArgumentsError)
        found = self.store.tenant_list(name)
        return found[0] if found else TenantRecord(name=name)

    def list(self) -> builtins.list[TenantRecord]:
        """Configured tenants and tenants with running or waiting jobs."""
        return self.store.tenant_list(None)
