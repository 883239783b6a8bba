"""Executor: runs one job and turns how it ended into a Completion value. It never
writes to the database; the completer decides how and when to write."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import dataclasses
import json
import logging
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from rota.app import App
from rota.context import Context
from rota.drivers.base import Completion
from rota.errors import (
    ArgumentsError,
    ConfigurationError,
    Discard,
    LeaseLostError,
    PayloadError,
    Retry,
    Snooze,
    TaskTimeoutError,
    UnknownTaskError,
    describe,
)
from rota.job import SEALED_MARK, Job, JobState, Outcome
from rota.payload import encode
from rota.task import Task

log = logging.getLogger("rota.worker")

MESSAGE_LIMIT = 2_000
_HIDDEN_ARGUMENTS_ERROR = "the arguments do not match the task (details hidden: encrypted)"
TRACEBACK_LIMIT = 8_000


@dataclass
class Execution:
    completion: Completion | None  # None: the lease was lost, nothing to write
    # A sync task that outlived its timeout or the shutdown grace still occupies a thread.
    straggler: concurrent.futures.Future[Any] | None = None
    error: BaseException | None = None  # what the task raised, for rota.testing.inline
    completed: bool = False  # already completed inside ctx.transaction()


def _entry(
    outcome: Outcome,
    exc: BaseException | None = None,
    *,
    message: str | None = None,
    **extra: str,
) -> str:
    """The history entry of one attempt. Every text in it is made storable first, so no
    message a task controls can make its outcome unwritable (#17)."""
    entry: dict[str, Any] = {"outcome": str(outcome)}
    if exc is not None:
        entry["error_type"] = _storable(
            f"{type(exc).__module__}.{type(exc).__qualname__}".removeprefix("builtins.")
        )
        entry["message"] = _storable((message or describe(exc))[:MESSAGE_LIMIT])
        text = _storable(_traceback(exc))
        # Keep the end of a long traceback: the frame that raised is the useful part.
        entry["traceback"] = text if len(text) <= TRACEBACK_LIMIT else "…" + text[-TRACEBACK_LIMIT:]
    elif message:
        entry["message"] = _storable(message[:MESSAGE_LIMIT])
    entry.update(extra)
    return json.dumps(entry)


def _traceback(exc: BaseException) -> str:
    try:
        return "".join(traceback.format_exception(type(exc), exc, _user_frames(exc.__traceback__)))
    except Exception as err:  # a broken exception must not lose the attempt's outcome
        return f"<the traceback of {type(exc).__name__} could not be formatted: {err!r}>"


def _storable(text: str) -> str:
    """Text both dialects store as it is: a NUL (PostgreSQL refuses it) and lone
    surrogates (not UTF-8) become visible escapes, `\\x00` and `\\ud800`."""
    if "\x00" in text:
        text = text.replace("\x00", "\\x00")
    if not text.isascii():
        text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text


class Executor:
    def __init__(self, app: App, threads: concurrent.futures.ThreadPoolExecutor) -> None:
        self.app = app
        self.threads = threads
        self._finished: list[tuple[asyncio.Future[object], concurrent.futures.Future[Any]]] = []
        self._finished_lock = threading.Lock()
        self._wake_pending = False

    async def run(
        self, job: Job, ctx: Context, runner: asyncio.Task[Any] | None = None
    ) -> Execution:
        """Run `job` in the asyncio task `runner` (the current one, if not given: a worker
        that knows it saves looking it up for every job)."""
        token = job.lease_token or ""
        try:
            task = self.app.get_task(job.task)
        except UnknownTaskError as exc:
            # Another worker version may know it (a rolling deploy): retry, don't drop.
            return Execution(self._failure(job, token, exc, None), error=exc)
        sealed = SEALED_MARK in job.args
        if sealed:
            # Decrypted here and nowhere else: only the running task sees the arguments.
            try:
                job = ctx.job = dataclasses.replace(job, args=self._open(job.args))
            except ConfigurationError as exc:
                # Another worker may hold the key (a rolling key change): retry, don't drop.
                return Execution(self._failure(job, token, exc, task), error=exc)
        try:
            kwargs = task.args_model.load(job.task, job.args)
        except ArgumentsError as exc:
            # A validation message may quote argument values: not those of encrypted ones.
            entry = (
                _entry(Outcome.DISCARDED, message=_HIDDEN_ARGUMENTS_ERROR)
                if sealed
                else _entry(Outcome.DISCARDED, exc)
            )
            completion = Completion(job.id, token, JobState.DISCARDED, entry)
            return Execution(completion, error=exc)
        straggler: concurrent.futures.Future[Any] | None = None
        try:
            if task.is_async:
                result = await self._call_async(task, ctx, kwargs, runner)
            else:
                result, straggler = await self._call_sync(task, ctx, kwargs)
        except asyncio.CancelledError:
            if ctx.cancel_reason is None:
                raise  # not ours: the worker itself is being torn down
            return Execution(self._stopped(job, token, ctx), straggler)
        except _Stopped as stopped:
            return Execution(self._stopped(job, token, ctx), stopped.future)
        except _TimedOut as timed_out:
            completion = self._failure(job, token, timed_out.error, task)
            return Execution(completion, timed_out.future, timed_out.error)
        except LeaseLostError as exc:
            log.warning("job %s: %s", job.id, exc)
            return Execution(None, error=exc)  # another worker owns it; nothing to write
        except Exception as exc:
            if ctx.completed_in_transaction:
                # The job's effects and completion already committed together.
                log.warning("job %s raised after ctx.transaction() completed it: %r", job.id, exc)
                return Execution(None, error=exc, completed=True)
            return Execution(self._raised(job, token, ctx, task, exc), error=exc)
        if ctx.completed_in_transaction:
            return Execution(None, straggler, completed=True)
        try:
            result_json = (
                None
                if result is None
                else encode(
                    result, what=f"the result of {job.task}", limit=self.app.max_payload_bytes
                )
            )
        except PayloadError as exc:
            # The same result will fail the same way on every attempt: dead-letter it now.
            entry = _entry(Outcome.DISCARDED, exc)
            return Execution(Completion(job.id, token, JobState.DISCARDED, entry), straggler, exc)
        return Execution(Completion.completed(job.id, token, result_json), straggler)

    def _open(self, args: dict[str, Any]) -> dict[str, Any]:
        sealer = self.app.sealer
        if sealer is None:
            raise ConfigurationError(
                "this job's arguments are encrypted, but no encryption feature is plugged "
                "into this worker's App"
            )
        return sealer.open(args)

    # --- calling the function -----------------------------------------------------------

    async def _call_async(
        self,
        task: Task[Any, Any],
        ctx: Context,
        kwargs: dict[str, Any],
        runner: asyncio.Task[Any] | None,
    ) -> Any:
        coro = task.func(ctx, **kwargs) if task.takes_context else task.func(**kwargs)
        current = runner or asyncio.current_task()
        if current is not None:
            # request_cancel runs on the loop, so the task can be cancelled directly.
            ctx.on_cancel(current.cancel)
        timeout = task.policy.timeout
        if timeout is None:
            return await coro
        try:
            async with asyncio.timeout(timeout):
                return await coro
        except TimeoutError:
            if ctx.cancel_reason is not None:
                raise asyncio.CancelledError() from None
            raise TaskTimeoutError(f"{task.name} ran longer than its {timeout}s timeout") from None

    async def _call_sync(
        self, task: Task[Any, Any], ctx: Context, kwargs: dict[str, Any]
    ) -> tuple[Any, concurrent.futures.Future[Any] | None]:
        loop = asyncio.get_running_loop()
        # One future settles the wait: the thread finishing, a stop request or the timeout,
        # whichever comes first (cheaper per job than asyncio.wait over several futures).
        settled: asyncio.Future[object] = loop.create_future()
        # The thread runs in a copy of this job's context: its log fields and trace span
        # (rota.observe) follow the task into the thread, as with asyncio.to_thread.
        run: Callable[..., Any] = contextvars.copy_context().run
        if task.takes_context:
            future = self.threads.submit(run, task.func, ctx, **kwargs)
        else:
            future = self.threads.submit(run, task.func, **kwargs)
        future.add_done_callback(lambda f: self._thread_finished(loop, settled, f))

        def on_cancel() -> None:
            # Operator cancels are cooperative for threads (ctx.cancelled); shutdown past
            # the grace period, timeouts and lost leases stop waiting on the thread.
            if ctx.cancel_reason != "cancelled":
                _settle(settled, _STOP)

        ctx.on_cancel(on_cancel)
        timer = None
        if task.policy.timeout is not None:
            timer = loop.call_later(task.policy.timeout, _settle, settled, _TIMEOUT)
        outcome = await settled
        if timer is not None:
            timer.cancel()
        if outcome is future:
            return future.result(), None
        if outcome is _STOP:
            raise _Stopped(future)
        ctx.request_cancel("timeout")
        raise _TimedOut(
            future,
            TaskTimeoutError(f"{task.name} ran longer than its {task.policy.timeout}s timeout"),
        )

    def _thread_finished(
        self,
        loop: asyncio.AbstractEventLoop,
        settled: asyncio.Future[object],
        future: concurrent.futures.Future[Any],
    ) -> None:
        """Called in the task's thread. Finished threads are handed to the loop in
        batches: one wake-up of the loop for all that finished since the last one."""
        with self._finished_lock:
            self._finished.append((settled, future))
            if self._wake_pending:
                return
            self._wake_pending = True
        loop.call_soon_threadsafe(self._settle_finished)

    def _settle_finished(self) -> None:
        with self._finished_lock:
            batch, self._finished = self._finished, []
            self._wake_pending = False
        for settled, future in batch:
            _settle(settled, future)

    # --- completions ----------------------------------------------------------------------

    def _raised(
        self, job: Job, token: str, ctx: Context, task: Task[Any, Any], exc: Exception
    ) -> Completion | None:
        """The completion for a task that raised `exc` (control flow or an error)."""
        if isinstance(exc, Snooze):
            state = JobState.SCHEDULED if exc.seconds > 0 else JobState.AVAILABLE
            entry = _entry(Outcome.SNOOZED, message=f"snoozed for {exc.seconds}s")
            return Completion(job.id, token, state, entry, delay=exc.seconds, refund_attempt=True)
        if isinstance(exc, Discard):
            entry = _entry(Outcome.DISCARDED, exc, message=exc.reason)
            return Completion(job.id, token, JobState.DISCARDED, entry)
        if isinstance(exc, Retry):
            return self._failure(job, token, exc, task, after=exc.after)
        if ctx.cancel_reason in ("cancelled", "shutdown", "lost"):
            # The task was told to stop and stopped with an error: the stop is the outcome
            # (a shutdown must not spend an attempt, a lost lease has nothing to write).
            return self._stopped(job, token, ctx)
        if isinstance(exc, task.policy.permanent):
            return Completion(job.id, token, JobState.DISCARDED, _entry(Outcome.DISCARDED, exc))
        return self._failure(job, token, exc, task)

    def _failure(
        self,
        job: Job,
        token: str,
        exc: BaseException,
        task: Task[Any, Any] | None,
        *,
        after: float | None = None,
    ) -> Completion:
        if job.attempt >= job.max_attempts:
            return Completion(job.id, token, JobState.DISCARDED, _entry(Outcome.DISCARDED, exc))
        if after is None:
            after = task.policy.backoff.delay(job.attempt) if task is not None else 5.0
        state = JobState.RETRYABLE if after > 0 else JobState.AVAILABLE
        return Completion(job.id, token, state, _entry(Outcome.FAILED, exc), delay=after)

    def _stopped(self, job: Job, token: str, ctx: Context) -> Completion | None:
        reason = ctx.cancel_reason
        if reason == "cancelled":
            return Completion(
                job.id,
                token,
                JobState.CANCELLED,
                _entry(Outcome.CANCELLED, message="cancelled by request"),
            )
        if reason == "shutdown":
            # Not the job's fault: give the attempt back and let another worker run it now,
            # in its place in line (delay None keeps its run_at; its priority is unchanged).
            entry = _entry(
                Outcome.SHUTDOWN,
                message="worker shut down before the job finished",
                condition="DisruptionTarget",
                reason="WorkerShutdown",
            )
            return Completion(
                job.id, token, JobState.AVAILABLE, entry, delay=None, refund_attempt=True
            )
        return None  # lease lost: the job belongs to someone else now

    def unstorable(self, job: Job, completion: Completion, error: BaseException) -> Completion:
        """What to write when the database refused `completion` (one of its values): a
        failed attempt that says its outcome could not be stored, retried or
        dead-lettered by the task's policy. Everything in it is storable."""
        reason = PayloadError(
            f"the outcome ({completion.state}) could not be stored: "
            f"{type(error).__name__}: {describe(error)}"
        )
        task = self.app.tasks.get(job.task)
        return self._failure(job, completion.lease_token, reason, task)


_OWN_FRAMES = (
    str(Path(__file__).resolve().parent.parent),  # rota itself
    str(Path(asyncio.__file__).resolve().parent),
    str(Path(concurrent.futures.__file__).resolve().parent),
)


def _user_frames(tb: TracebackType | None) -> TracebackType | None:
    """Skip the leading frames of rota, asyncio and the thread pool, so a stored
    traceback starts in the task's own code."""
    first = tb
    while first is not None and first.tb_frame.f_code.co_filename.startswith(_OWN_FRAMES):
        first = first.tb_next
    return first or tb


class _Stopped(Exception):
    def __init__(self, future: concurrent.futures.Future[Any]) -> None:
        self.future = future


class _TimedOut(Exception):
    def __init__(self, future: concurrent.futures.Future[Any], error: TaskTimeoutError) -> None:
        super().__init__(str(error))
        self.future = future
        self.error = error


_STOP = object()
_TIMEOUT = object()


def _settle(settled: asyncio.Future[object], outcome: object) -> None:
    if not settled.done():
        settled.set_result(outcome)
