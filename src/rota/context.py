"""What a running task sees: its job, its attempt, cancellation and heartbeats."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from rota.job import Job

_task_log = logging.getLogger("rota.task")


class Context:
    """Passed as the first argument to tasks that declare a `ctx` parameter.

    Built once per attempt on the worker's hot path, so everything that is not
    always needed (the logger, the wait event) is created on first use."""

    __slots__ = (
        "_cancel_callbacks",
        "_cancelled",
        "_event",
        "_log",
        "_nudge",
        "cancel_reason",
        "job",
        "worker_id",
    )

    def __init__(
        self,
        job: Job,
        *,
        worker_id: str,
        nudge: Callable[[], None] | None = None,
    ) -> None:
        self.job = job
        self.worker_id = worker_id
        self._nudge = nudge
        self._cancelled = False
        self._event: threading.Event | None = None
        self._cancel_callbacks: list[Callable[[], Any]] | None = None
        self._log: logging.LoggerAdapter[logging.Logger] | None = None
        self.cancel_reason: str | None = None  # "cancelled", "shutdown", "lost", "timeout"

    @property
    def attempt(self) -> int:
        """1 on the first run, 2 on the first retry, and so on."""
        return self.job.attempt

    @property
    def args(self) -> dict[str, Any]:
        return self.job.args

    @property
    def log(self) -> logging.LoggerAdapter[logging.Logger]:
        """A logger whose records carry the job id, task, queue and attempt."""
        if self._log is None:
            job = self.job
            self._log = logging.LoggerAdapter(
                _task_log,
                {"job_id": job.id, "task": job.task, "queue": job.queue, "attempt": job.attempt},
            )
        return self._log

    @property
    def cancelled(self) -> bool:
        """True once the job should stop: cancelled by an operator, timed out, its
        worker is shutting down past the grace period, or its lease was lost. Long
        sync tasks should check it between units of work."""
        return self._cancelled

    def wait_cancelled(self, timeout: float | None = None) -> bool:
        """Sleep up to `timeout` seconds, waking early on cancellation (sync tasks)."""
        if self._event is None:
            self._event = threading.Event()
        if self._cancelled:  # checked after creating the event: no lost wake-up
            self._event.set()
        return self._event.wait(timeout)

    def heartbeat(self) -> None:
        """Ask the worker to renew this job's lease now rather than on its next beat."""
        if self._nudge is not None:
            self._nudge()

    def request_cancel(self, reason: str) -> None:
        """Ask the task to stop (called by the worker, on its event loop)."""
        if self._cancelled:
            return
        self.cancel_reason = reason
        self._cancelled = True
        if self._event is not None:
            self._event.set()
        for callback in self._cancel_callbacks or ():
            callback()

    def on_cancel(self, callback: Callable[[], Any]) -> None:
        """Run `callback` (on the worker's loop) when the job is asked to stop."""
        if self._cancel_callbacks is None:
            self._cancel_callbacks = []
        self._cancel_callbacks.append(callback)
        if self._cancelled:
            callback()
