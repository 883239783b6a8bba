"""`app.queues`: queue controls shared by every worker and changeable while they run:
pause/resume, a global concurrency limit and a rate limit, and poisoned partition keys."""

from __future__ import annotations

import builtins
import enum
from typing import TYPE_CHECKING

from rota.auth import Principal
from rota.errors import ArgumentsError
from rota.labels import check_queue_name
from rota.ops.bulk import MAX_BULK, BulkReport, JobControls
from rota.ops.holds import WindowsAndBreakers
from rota.ops.model import (
    PoisonedKey,
    QueueChange,
    QueueControl,
    check_global_limit,
    check_rate,
)
from rota.ops.store import OpsStore

if TYPE_CHECKING:
    from rota.app import App


class _Keep(enum.Enum):
    KEEP = "keep"


KEEP = _Keep.KEEP  # "leave this limit as it is"


class QueueControls(WindowsAndBreakers):
    """`app.queues`: `app.queues.configure("mail", global_limit=3, rate=(100, 60))`."""

    def __init__(self, app: App) -> None:
        self._app = app

    def purge(
        self,
        name: str,
        *,
        reason: str,
        dry_run: bool = False,
        limit: int = MAX_BULK,
        principal: Principal | None = None,
        token: str | None = None,
    ) -> BulkReport:
        """Cancel every waiting job of queue `name` (running ones finish), audited:
        `app.queues.purge("mail", reason="bad template", dry_run=True)` first to count."""
        return JobControls(self._app).purge(
            name,
            reason=reason,
            dry_run=dry_run,
            limit=limit,
            principal=principal,
            token=token,
        )

    def configure(
        self,
        name: str,
        *,
        global_limit: int | _Keep | None = KEEP,
        rate: tuple[int, float] | _Keep | None = KEEP,
    ) -> QueueControl:
        """Set (or with None, clear) a queue's limits; a limit not passed is kept.

        - `global_limit`: at most this many jobs of the queue run at once, over all
          workers (each worker's own concurrency still applies).
        - `rate=(jobs, seconds)`: at most `jobs` starts in any `seconds`-long window,
          over all workers.

        Workers read the limits on every claim: no restart is needed."""
        check_queue_name(name, ArgumentsError)
        if global_limit is KEEP and rate is KEEP:
            raise ArgumentsError("nothing to change: pass global_limit= and/or rate=")
        change = QueueChange(
            name=name,
            global_limit=None if global_limit is KEEP else check_global_limit(global_limit),
            rate=None if rate is KEEP else check_rate(rate),
            set_global=global_limit is not KEEP,
            set_rate=rate is not KEEP,
        )
        return OpsStore(self._app.driver).queue_configure(change)

    def get(self, name: str) -> QueueControl:
        """A queue's stored controls (an unknown queue has none: unlimited, running)."""
        check_queue_name(name, ArgumentsError)
        found = OpsStore(self._app.driver).queue_controls(name)
        return found[0] if found else QueueControl(name=name)

    def list(self) -> builtins.list[QueueControl]:
        """Every queue with stored controls."""
        return OpsStore(self._app.driver).queue_controls(None)

    def pause(self, name: str) -> None:
        """Start nothing new from `name` (running jobs finish); survives restarts."""
        self._app.pause_queue(name)

    def resume(self, name: str) -> None:
        self._app.resume_queue(name)

    def partitions(
        self, queue: str | None = None, *, limit: int = 100
    ) -> builtins.list[PoisonedKey]:
        """Partition keys held up by a dead letter. Later jobs of such a key wait (order
        is the point of a key) until the dead letter is replayed (`app.dlq.replay`) or
        dismissed (`app.dlq.dismiss`); other keys keep flowing."""
        if queue is not None:
            check_queue_name(queue, ArgumentsError)
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ArgumentsError("limit must be from 1 to 10000")
        return OpsStore(self._app.driver).queue_partitions(queue, limit)
