"""Completer: writes Completions in batches (group commit). A fetcher about to claim takes
the waiting ones along (one transaction for the jobs that ended and those that start);
what no claim takes within a moment is written here, so a completion waits at most that
moment plus one round trip, however busy or idle the worker is."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence

from rota.drivers.base import Completion, Driver
from rota.maintenance.service import DbCall

log = logging.getLogger("rota.worker")

# How long a completion waits for a claim to carry it before the completer writes it: a
# job that ends frees a slot, and the fetcher it wakes claims within a few loop steps.
LINGER = 0.002


class Completer:
    def __init__(
        self,
        driver: Driver,
        db: DbCall,
        on_written: Callable[[Completion, bool], None],
        *,
        max_batch: int = 1000,
        linger: float = LINGER,
    ) -> None:
        self.driver = driver
        self.db = db
        self.on_written = on_written
        self.max_batch = max_batch
        self.linger = linger
        self._buffer: list[Completion] = []
        self._event = asyncio.Event()
        self._closing = False
        self.written = 0
        self.refused = 0

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

    def settle(self, batch: Sequence[Completion], accepted: set[int]) -> None:
        """`batch` was written; those not in `accepted` were refused by their fence."""
        for completion in batch:
            ok = completion.job_id in accepted
            if not ok:
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
                accepted = await self._write(batch)
                self.settle(batch, accepted)
            if self._closing:
                return

    async def _write(self, batch: list[Completion]) -> set[int]:
        delay = 0.05
        while True:
            try:
                result: set[int] = await self.db(self.driver.job_complete_many, batch)
                return result
            except Exception as exc:
                # Keep the outcomes and retry: if the database stays away long enough for
                # the leases to expire, the rescuer re-runs the jobs (at-least-once).
                log.warning(
                    "writing %d completions failed (%s: %s); retrying in %.2fs",
                    len(batch),
                    type(exc).__name__,
                    exc,
                    delay,
                )
                await asyncio.sleep(delay)
                delay = min(delay * 2, 5.0)

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
