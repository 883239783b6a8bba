"""`app.routing`: which workers advertise which capabilities, and which waiting jobs no
live worker can run (so a job is never silently stuck behind a missing resource)."""

from __future__ import annotations

import builtins
from typing import TYPE_CHECKING

from rota.errors import ArgumentsError
from rota.labels import check_queue_name
from rota.routing.model import Unroutable, WorkerAdvert
from rota.routing.store import RoutingStore

if TYPE_CHECKING:
    from rota.app import App


class Routing:
    """`app.routing.unroutable()`, `app.routing.workers()`."""

    def __init__(self, app: App) -> None:
        self._app = app

    def workers(self) -> builtins.list[WorkerAdvert]:
        """Live workers that advertise capabilities (every worker keeps a heartbeat row;
        those of plain workers list none and are left out here)."""
        return [w for w in RoutingStore(self._app.driver).worker_list() if w.capabilities]

    def unroutable(
        self, queue: str | None = None, *, limit: int = 100
    ) -> builtins.list[Unroutable]:
        """Waiting jobs whose requirements no live worker serving their queue covers,
        grouped by queue and requirements, oldest first. They start once such a worker
        runs; until then they are not lost, only waiting."""
        if queue is not None:
            check_queue_name(queue, ArgumentsError)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ArgumentsError("limit must be from 1 to 10000")
        return RoutingStore(self._app.driver).job_unroutable(queue, limit)
