"""What a running task sees: its job, its attempt, cancellation and heartbeats."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from rota.job import Job


class Context:
    """Passed as the first argument to tasks that declare a `ctx` parameter."""

    def __init__(
        self,
        job: Job,
        *,
        worker_id: str,
        nudge: Callable[[], None] | None = None,
    ) -> None:
        self.job = job
        self.worker_id = worker_id
        self.log = logging.LoggerAdapter(
            logging.getLogger("rota.task"),
            {"job_id": job.id, "task": job.task, "queue": job.queue, "attempt": job.attempt},
        )
        self._nudge = nudge
        self._cancel = threading.Event()
        self.cancel_reason: str | None = None  # "cancelled", "shutdown", "lost", "timeout"
        self._on_cancel: list[Callable[[], Any]] = []

    @property
    def attempt(self) -> int:
        """1 on the first run, 2 on the first retry, and so on."""
        return self.job.attempt

    @property
    def args(self) -> dict[str, Any]:
        return self.job.args

    @property
    def cancelled(self) -> bool:
        """True once the job should stop: cancelled by an operator, timed out, its
        worker is shutting down past the grace period, or its lease was lost. Long
        sync tasks should check it between units of work."""
        return self._cancel.is_set()

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Sleep up to `timeout` seconds, waking early on cancellation (sync tasks)."""
        return self._cancel.wait(timeout)

    def heartbeat(self) -> None:
        """Ask the worker to renew this job's lease now rather than on its next beat."""
        if self._nudge is not None:
            self._nudge()

    def request_cancel(self, reason: str) -> None:
        if self._cancel.is_set():
            return
        self.cancel_reason = reason
        self._cancel.set()
        for callback in self._on_cancel:
            callback()

    def on_cancel(self, callback: Callable[[], Any]) -> None:
        """Run `callback` (from the worker's loop) when the job is asked to stop."""
        self._on_cancel.append(callback)
        if self._cancel.is_set():
            callback()
