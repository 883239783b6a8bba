"""Completer: writes Completions in batches (group commit). A fetcher about to claim takes
the waiting ones along (one transaction for the jobs that ended and those that start);
what no claim takes within a moment is written here, so a completion waits at most that
moment plus one round trip, however busy or idle the worker is. One outcome the database
refuses never holds up the others."""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence, Set

from rota.drivers.base import Completion, Driver
from rota.errors import DatabaseUnavailableError
from rota.maintenance.service import DbCall, backoff_delay, log_failure

log = logging.getLogger("rota.worker")

# How long a completion waits for a claim to carry it before the completer writes it: a
# job that ends frees a slot, and the fetcher it wakes claims within a few loop steps.
LINGER = 0.002

# After a failed write: 0.05 s, doubling up to 5 s, jittered (maintenance.service).
RETRY_BASE = 0.05
RETRY_MAX = 5.0
# A part that keeps failing for another reason than the database being away is split
# after this many tries, to find whether one row is the cause.
SPLIT_AFTER = 3

# What to write instead of a completion the database refused (a failed attempt that says
# so), or None when there is nothing better to write.
Replacement = Callable[[Completion, BaseException], Completion | None]


def refused_value(exc: BaseException) -> bool:
    """The database refused a value of the batch, not the connection: SQLSTATE class 22
    (data exception: a NUL, malformed JSON, a number out of range) on PostgreSQL, JSON
    SQLite cannot parse, text no codec can encode. The same values fail the same way on
    every retry, so they are isolated instead of retried."""
    for err in (exc, exc.__cause__):
        if err is None:
            continue
        if isinstance(err, UnicodeError | OverflowError):
            return True
        sqlstate = getattr(err, "sqlstate", None)
        if isinstance(sqlstate, str) and sqlstate.startswith("22"):
            return True
        if type(err).__module__ == "sqlite3" and "malformed JSON" in str(err):
            return True
    return False


class Completer:
    def __init__(
        self,
        driver: Driver,
        db: DbCall,
        on_written: Callable[[Completion, bool], None],
        *,
        max_batch: int = 1000,
        linger: float = LINGER,
        replacement: Replacement | None = None,
        give_up_after: float = 30.0,
    ) -> None:
        self.driver = driver
        self.db = db
        self.on_written = on_written
        self.max_batch = max_batch
        self.linger = linger
        self.replacement = replacement
        # A completion that cannot be written for this long is given up: its lease has
        # run out by then, so the rescuer runs the job again (at least once).
        self.give_up_after = give_up_after
        self._buffer: list[Completion] = []
        self._event = asyncio.Event()
        self._closing = False
        self.written = 0
        self.refused = 0
        self.unwritable = 0  # given up, or written as "could not be stored" instead

    def submit(self, completion: Completion) -> None:
        self._buffer.append(completion)
        self._event.set()

    @property
    def pending(self) -> int:
        return len(self._buffer)

    def take(self) -> list[Completion]:
        """Hand the waiting completions to a claim that writes them (up to one batch)."""
        batch = self._buffer[: self.max_batch]
        del self._buffer[: self.max_batch]
        return batch

    def give_back(self, batch: Sequence[Completion]) -> None:
        """A claim that carried `batch` failed: write it here instead (first in line)."""
        if batch:
            self._buffer[:0] = batch
            self._event.set()

    def settle(
        self, batch: Sequence[Completion], accepted: Set[int], dropped: Set[int] = frozenset()
    ) -> None:
        """`batch` was written; those neither in `accepted` nor given up (`dropped`) were
        refused by their fence."""
        for completion in batch:
            ok = completion.job_id in accepted
            if not ok and completion.job_id not in dropped:
                self.refused += 1
                log.warning(
                    "stale write refused: job %s is no longer running under this "
                    "worker's lease (it was rescued or cancelled); outcome %s dropped",
                    completion.job_id,
                    completion.state,
                )
            self.on_written(completion, ok)
        self.written += len(batch)

    async def run(self) -> None:
        while True:
            await self._event.wait()
            self._event.clear()
            if not self._closing and self.linger:
                # A claim may take them along; write only what is still here afterwards.
                await asyncio.sleep(self.linger)
            while self._buffer:
                batch = self.take()
                accepted, dropped = await self._write(batch)
                self.settle(batch, accepted, dropped)
            if self._closing:
                return

    async def _write(self, batch: list[Completion]) -> tuple[set[int], set[int]]:
        """Write `batch`; returns the ids accepted and the ids given up. Parts of the batch
        are retried with backoff while the database is away; a part it refuses is split
        until the refused outcome is found and written as a failed attempt instead."""
        accepted: set[int] = set()
        dropped: set[int] = set()
        parts: deque[tuple[list[Completion], int, float]] = deque([(batch, 0, 0.0)])
        while parts:
            part, tries, since = parts.popleft()
            try:
                accepted |= await self.db(self.driver.job_complete_many, part)
                continue
            except Exception as exc:
                error: Exception = exc
            if refused_value(error):
                if len(part) > 1:
                    first, second = _halves(part)
                    parts.extendleft([(second, 0, 0.0), (first, 0, 0.0)])
                    continue
                written = await self._replace(part[0], error)
                (accepted if written else dropped).add(part[0].job_id)
                continue
            tries += 1
            since = since or time.monotonic()
            away = isinstance(error, DatabaseUnavailableError)
            if not away and len(part) > 1 and tries >= SPLIT_AFTER:
                first, second = _halves(part)
                parts.extendleft([(second, 0, since), (first, 0, since)])
                continue
            if not away and time.monotonic() - since > self.give_up_after:
                self.unwritable += len(part)
                self._give_up(part, error)
                dropped.update(c.job_id for c in part)
                continue
            delay = backoff_delay(tries, RETRY_BASE, RETRY_MAX)
            # Keep the outcomes and retry: if the database stays away long enough for the
            # leases to expire, the rescuer re-runs the jobs (at-least-once).
            log_failure(log, f"writing {len(part)} completions", error, f"retrying in {delay:.2f}s")
            await asyncio.sleep(delay)
            parts.appendleft((part, tries, since))
        return accepted, dropped

    async def _replace(self, completion: Completion, error: Exception) -> bool:
        """Write a failed attempt in place of `completion`, which the database refused;
        True when it was accepted."""
        self.unwritable += 1
        instead = None if self.replacement is None else self.replacement(completion, error)
        if instead is not None:
            try:
                accepted: set[int] = await self.db(self.driver.job_complete_many, [instead])
            except Exception as exc:
                error = exc
            else:
                log.error(
                    "job %s: the database refused its outcome (%s: %s); recorded as a "
                    "failed attempt instead",
                    completion.job_id,
                    type(error).__name__,
                    error,
                )
                return completion.job_id in accepted
        self._give_up([completion], error)
        return False

    def _give_up(self, part: list[Completion], error: Exception) -> None:
        log.error(
            "gave up writing the outcome of job(s) %s (%s: %s); their leases will run out "
            "and they will run again",
            ", ".join(str(c.job_id) for c in part),
            type(error).__name__,
            error,
            exc_info=error,
        )

    async def close(self, task: asyncio.Task[None], timeout: float) -> None:
        """Flush what is buffered, then stop (give up after `timeout` seconds)."""
        self._closing = True
        self._event.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            log.error(
                "gave up flushing %d completions; their leases will expire and the "
                "jobs will run again",
                self.pending,
            )
            task.cancel()


def _halves(part: list[Completion]) -> tuple[list[Completion], list[Completion]]:
    middle = len(part) // 2
    return part[:middle], part[middle:]
