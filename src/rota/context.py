"""What a running task sees: its job and attempt, cancellation and heartbeats, and the
tools for exactly-once effects: a transaction that commits with the job's completion,
durable steps, idempotency keys and checkpoints."""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from rota.drivers.deadlines import call_deadline
from rota.errors import LeaseLostError, RotaError
from rota.job import Job, JobState
from rota.payload import check_text, encode

if TYPE_CHECKING:
    from rota.drivers.base import Driver, ProgressUpdate

T = TypeVar("T")

# What features show a task about its job (`ctx.workflow`): name -> a factory of the view
# from the job's meta and the database. Features register theirs when they are imported.
ViewFactory = Callable[[dict[str, Any], "Driver | None"], Any]
_VIEWS: dict[str, ViewFactory] = {}


def register_view(name: str, factory: ViewFactory) -> None:
    """Let `ctx.view(name)` (and a property like `ctx.workflow`) build a feature's view."""
    _VIEWS[name] = factory


_COMPLETED_IN_TRANSACTION = json.dumps({"outcome": "completed", "message": "ctx.transaction()"})

_task_log = logging.getLogger("rota.task")
PROGRESS_MESSAGE_LIMIT = 500
# Without a worker's progress writer (rota.testing, one-shot runs) a context writes its
# progress itself, at most this often.
PROGRESS_INTERVAL = 0.5


class Context:
    """Passed as the first argument to tasks that declare a `ctx` parameter.

    Built once per attempt on the worker's hot path, so everything that is not
    always needed (the logger, the wait event) is created on first use."""

    __slots__ = (
        "_cancel_callbacks",
        "_cancelled",
        "_driver",
        "_event",
        "_log",
        "_nudge",
        "_progress_at",
        "_progress_sink",
        "_steps",
        "_views",
        "cancel_reason",
        "completed_in_transaction",
        "draining",
        "job",
        "last_checkpoint",
        "lease_deadline",
        "worker_id",
    )

    def __init__(
        self,
        job: Job,
        *,
        worker_id: str,
        driver: Driver | None = None,
        nudge: Callable[[], None] | None = None,
        progress: Callable[[ProgressUpdate], None] | None = None,
    ) -> None:
        self.job = job
        self._progress_sink = progress
        self._progress_at = 0.0
        self.worker_id = worker_id
        self._driver = driver
        self._nudge = nudge
        self._steps: dict[str, Any] | None = None
        self._views: dict[str, Any] | None = None
        # The value the last attempt stored with checkpoint(): resume from here.
        self.last_checkpoint: Any = job.checkpoint
        # True once the worker got SIGTERM: checkpoint soon, the grace period is running.
        self.draining = False
        self.completed_in_transaction = False
        self._cancelled = False
        self._event: threading.Event | None = None
        self._cancel_callbacks: list[Callable[[], Any]] | None = None
        self._log: logging.LoggerAdapter[logging.Logger] | None = None
        self.cancel_reason: str | None = None  # "cancelled", "shutdown", "lost", "timeout"
        # When this worker stops the job unless its lease is renewed (a time.monotonic()
        # value, read again as renewals move it): ctx.transaction() is cut there.
        self.lease_deadline: Callable[[], float | None] | None = None

    @property
    def meta(self) -> dict[str, Any]:
        """What rota's features attached to this job (batch index, workflow step, ...)."""
        return self.job.meta

    @property
    def workflow(self) -> Any:
        """Where this job sits in a workflow (a rota.workflows.context.StepContext: step,
        index, total, the run's args and the results of completed steps); None when the
        job is not a workflow step."""
        return self.view("workflow")

    def view(self, name: str) -> Any:
        """A feature's view of this job (built once per attempt), or None when no
        plugged feature registered `name`."""
        if self._views is None:
            self._views = {}
        if name not in self._views:
            factory = _VIEWS.get(name)
            self._views[name] = None if factory is None else factory(self.job.meta, self._driver)
        return self._views[name]

    @property
    def index(self) -> int:
        """This job's index in its batch (0 ... total - 1): Kubernetes' completion index."""
        return int(self._batch_meta("index"))

    @property
    def total(self) -> int:
        """How many indexes (completions) this job's batch has."""
        return int(self._batch_meta("total"))

    def _batch_meta(self, key: str) -> Any:
        batch = self.job.meta.get("batch")
        if not isinstance(batch, dict) or key not in batch:
            raise RotaError(f"ctx.{key} is set only for jobs of a batch (app.batch(...))")
        return batch[key]

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

    def progress(self, fraction: float, message: str | None = None) -> None:
        """Report how far this job has come: `fraction` from 0 to 1 and a short message,
        shown by `rota jobs show` and the dashboard. Cheap to call in a loop: the worker
        keeps the latest value and writes at most one every half second (never blocking
        the task), fenced by the lease token."""
        from rota.drivers.base import ProgressUpdate

        if (
            isinstance(fraction, bool)
            or not isinstance(fraction, int | float)
            or not math.isfinite(fraction)
            or not 0 <= fraction <= 1
        ):
            raise RotaError(f"progress is a fraction from 0 to 1, not {fraction!r}")
        if message is not None and not isinstance(message, str):
            raise RotaError(f"a progress message is a string, not {type(message).__name__}")
        if message is not None:
            check_text(message, "a progress message")  # else the writer could never store it
        if message is not None and len(message) > PROGRESS_MESSAGE_LIMIT:
            message = message[: PROGRESS_MESSAGE_LIMIT - 1] + "…"
        update = ProgressUpdate(self.job.id, self.lease_token, float(fraction), message)
        if self._progress_sink is not None:
            self._progress_sink(update)
            return
        now = time.monotonic()
        # Rate-limited, except the final value: "done" must not be the one dropped.
        if self._driver is None or (now - self._progress_at < PROGRESS_INTERVAL and fraction < 1):
            return
        self._progress_at = now
        self._driver.job_progress_record_many([update])

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

    # --- exactly-once tools ---------------------------------------------------------------

    @property
    def driver(self) -> Driver:
        if self._driver is None:
            raise RotaError("this context has no database (it was not made by a worker)")
        return self._driver

    @property
    def lease_token(self) -> str:
        return self.job.lease_token or ""

    def idempotency_key(self, name: str) -> str:
        """A key for `name` that is the same on every attempt of this job and differs
        between jobs: pass it to outside APIs that deduplicate requests by key."""
        job = self.job
        seed = f"rota|{job.task}|{job.id}|{job.created_at.isoformat()}|{name}"
        return hashlib.sha256(seed.encode()).hexdigest()[:32]

    @contextlib.contextmanager
    def transaction(self) -> Iterator[Any]:
        """A database connection whose transaction commits together with this job's
        completion: the writes made in the block happen exactly once.

        When the block exits cleanly the job is marked completed in the same transaction
        (fenced by the lease token); if this attempt lost its lease, everything rolls
        back and LeaseLostError is raised. In a worker, the block's connection is cut
        (and the transaction rolled back) once the job's lease may have run out: a
        silent network never holds it past the lease. What the task returns afterwards is not
        stored, and an error raised after the block no longer fails the job."""
        if self.completed_in_transaction:
            raise RotaError("ctx.transaction() completes the job: use it once per attempt")
        from rota.drivers.base import Completion

        completion = Completion(
            self.job.id, self.lease_token, JobState.COMPLETED, _COMPLETED_IN_TRANSACTION
        )
        deadline = self.lease_deadline
        guard = contextlib.nullcontext() if deadline is None else call_deadline(deadline)
        with guard, self.driver.transaction() as conn:
            yield conn
            if not self.driver.job_complete_many([completion], conn=conn):
                raise LeaseLostError(
                    f"job {self.job.id} attempt {self.job.attempt} lost its lease; "
                    "the transaction was rolled back"
                )
        self.completed_in_transaction = True

    def _recorded_steps(self) -> dict[str, Any]:
        if self._steps is None:
            self._steps = self.driver.step_list(self.job.id)
        return self._steps

    def step(self, name: str, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run `func(*args, **kwargs)` once for this job and record its JSON result.

        On a retry the recorded result is returned and `func` is not called again. The
        record is written after `func` returns, so a crash in between runs it again:
        give outside calls `ctx.idempotency_key(name)` to make that harmless."""
        recorded = self._recorded_steps()
        if name in recorded:
            return recorded[name]  # type: ignore[no-any-return]
        result = func(*args, **kwargs)
        self._record_step(name, result)
        return result

    async def step_async(
        self, name: str, func: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any
    ) -> T:
        """`step` for async tasks: `await ctx.step_async("charge", charge, order)`."""
        recorded = await asyncio.to_thread(self._recorded_steps)
        if name in recorded:
            return recorded[name]  # type: ignore[no-any-return]
        result = await func(*args, **kwargs)
        await asyncio.to_thread(self._record_step, name, result)
        return result

    def _record_step(self, name: str, result: Any) -> None:
        if not isinstance(name, str) or not name:
            raise RotaError("a step needs a non-empty name")
        result_json = encode(result, what=f"the result of step {name!r}")
        if not self.driver.step_record(self.job.id, self.lease_token, name, result_json):
            raise LeaseLostError(
                f"job {self.job.id} lost its lease before step {name!r} was recorded"
            )
        self._recorded_steps()[name] = json.loads(result_json)

    def checkpoint(self, value: Any) -> None:
        """Store `value` (JSON) durably; a retry of this job reads it as
        `ctx.last_checkpoint` and can resume there. Raises LeaseLostError if another
        worker owns the job now."""
        value_json = encode(value, what="the checkpoint")
        if not self.driver.job_checkpoint(self.job.id, self.lease_token, value_json):
            raise LeaseLostError(f"job {self.job.id} lost its lease; checkpoint refused")
        self.last_checkpoint = json.loads(value_json)

    async def checkpoint_async(self, value: Any) -> None:
        await asyncio.to_thread(self.checkpoint, value)
