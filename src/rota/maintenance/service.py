"""PeriodicService: the base owns the loop (interval, jitter, leader gate, error
backoff, rest while idle); each service only writes `run_once() -> Report`, which tests
call directly. Also what every loop of a worker does when a pass fails: back off, and
say why."""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar

from rota.drivers.base import Driver
from rota.errors import RotaError, describe

log = logging.getLogger("rota.maintenance")

# Runs a blocking driver call off the event loop.
DbCall = Callable[..., Awaitable[Any]]

# A resting service (see PeriodicService.rests) still looks every REST_FACTOR intervals,
# at most every REST_MAX seconds (but never more often than its interval): the safety net
# for work that comes with time rather than with a commit (a finished batch's TTL).
REST_FACTOR = 10
REST_MAX = 5.0


# A rest until work falls due ends this much after it: a pass a hair early (the loop's
# clock against the database's) would find nothing and wait a whole interval more.
DUE_SLACK = 0.005


def rest_interval(interval: float) -> float:
    """How long something that normally looks every `interval` seconds may rest where
    the worker hears of every commit: REST_FACTOR intervals, at most REST_MAX seconds, and
    never less than the interval itself."""
    return max(interval, min(REST_MAX, REST_FACTOR * interval))


def backoff_delay(failures: int, base: float, cap: float) -> float:
    """Seconds to wait after `failures` failures in a row: doubling from `base` up to
    `cap`, drawn from the upper half of that (jitter, so that workers that failed
    together do not retry in step, while each wait is still longer than the last)."""
    top = min(cap, base * 2 ** min(max(failures, 1) - 1, 60))
    return random.uniform(top / 2, top)


def expected_failure(exc: BaseException) -> bool:
    """A failure of the surroundings, not a bug: rota's own errors (the database is away,
    the schema or a privilege is missing), the network, and a driver's OperationalError
    (a lost connection; SQLite's busy database)."""
    return isinstance(exc, RotaError | OSError | TimeoutError) or any(
        cls.__name__ == "OperationalError" for cls in type(exc).__mro__
    )


def log_failure(logger: logging.Logger, what: str, exc: BaseException, then: str) -> None:
    """One line for an expected failure; with the traceback for anything else, which is a
    bug worth reporting (`what failed (Type: message); then`)."""
    logger.warning(
        "%s failed (%s: %s); %s",
        what,
        type(exc).__name__,
        describe(exc),
        then,
        exc_info=None if expected_failure(exc) else exc,
    )


class PeriodicService:
    name: ClassVar[str] = "service"
    leader_only: ClassVar[bool] = True  # False: every worker runs it, leader or not
    immediate: ClassVar[bool] = False  # run at once on start instead of after a random delay
    # True for a service whose only work is work falling due (`due()`): where it may rest
    # (SQLite), each pass asks due() first and writes only when something is due. There a
    # write transaction holds up every other writer even when it changes nothing, and
    # during a drain the commits end every rest, so the pass would come every interval.
    looks_first: ClassVar[bool] = False

    def __init__(self, driver: Driver, interval: float) -> None:
        if interval <= 0:
            raise ValueError(f"{self.name} interval must be > 0")
        self.driver = driver
        self.interval = interval
        self.runs = 0
        # Set by the worker where it hears of every commit (SQLite's change watcher): then
        # a pass that found nothing to do (`idle`) is followed by a rest until `changed()`
        # instead of a pass every interval. Elsewhere (PostgreSQL tells only of new jobs)
        # the service keeps its interval.
        self.rests = False
        self.rest = rest_interval(interval)
        # How long the current rest lasts at most (until a commit); None: not resting.
        self._resting_for: float | None = None
        self._changed: asyncio.Event | None = None

    def run_once(self) -> object:
        raise NotImplementedError

    def close(self) -> None:
        """Called once (blocking, off the loop) when the worker stops: undo what only a
        running worker should hold. Most services hold nothing."""

    def idle(self, report: object) -> bool:
        """True when the pass that returned `report` found nothing to do: its next work
        comes with a commit to the database, or with time at `due()`. Then, where the
        worker hears of every commit, it may rest until one (or until then)."""
        return False

    def due(self) -> float | None:
        """Seconds until time alone brings this service work (a scheduled job falling
        due), or None when only a commit will. Asked, off the loop, only after an idle
        pass where the service may rest; a service whose work comes with time overrides
        it."""
        return None

    def pass_once(self) -> tuple[object, float | None]:
        """One pass (blocking, off the loop): its report, and how long the service may
        rest after it (None: it keeps its interval; the report is None for a pass that
        looked first and found nothing due)."""
        if self.rests and self.looks_first:
            due_in = self.due()
            if due_in is None or due_in > 0:
                return None, self.rest_until(due_in)
        report = self.run_once()
        if not (self.rests and self.idle(report)):
            return report, None
        return report, self.rest_until(self.due())

    def rest_until(self, due_in: float | None) -> float:
        """The rest after an idle pass: until work falls due in `due_in` seconds (a hair
        after), at most the whole rest; the whole rest when nothing waits for its time."""
        if due_in is None:
            return self.rest
        return min(self.rest, max(due_in, 0.0) + DUE_SLACK)

    @property
    def resting(self) -> bool:
        return self._resting_for is not None

    def changed(self) -> None:
        """The database changed (a commit by any connection): a resting service looks."""
        if self._changed is not None:
            self._changed.set()

    def next_delay(self, report: object) -> float:
        """Seconds until the next pass after one that returned `report`: the interval,
        unless a service knows more work is coming (the batch controller after progress)."""
        return self.interval

    async def run(self, db: DbCall, is_leader: Callable[[], bool], stop: asyncio.Event) -> None:
        changed = self._changed = asyncio.Event()
        # A rest ends on a change or on stop: one waiter for the service's life, so that
        # each rest waits on one event without a task of its own.
        stopping = asyncio.ensure_future(stop.wait())
        stopping.add_done_callback(lambda _: changed.set())
        try:
            await self._loop(db, is_leader, stop, changed)
        finally:
            stopping.cancel()
            self._changed = None

    async def _loop(
        self,
        db: DbCall,
        is_leader: Callable[[], bool],
        stop: asyncio.Event,
        changed: asyncio.Event,
    ) -> None:
        # A random first delay keeps many workers started together from beating in step.
        delay = 0.0 if self.immediate else random.uniform(0, self.interval)
        failures = 0
        loop = asyncio.get_running_loop()
        began = loop.time()
        while not stop.is_set():
            if self._resting_for is not None:
                await wait_set(changed, self._resting_for)
                # Never more often than the interval, however fast commits come.
                delay = began + self.interval - loop.time()
            if await wait_set(stop, delay):
                return
            delay = self.interval
            self._resting_for = None
            if self.leader_only and not is_leader():
                continue
            changed.clear()  # a commit from here on is looked at by the next pass
            began = loop.time()
            try:
                report, rest = await db(self.pass_once)
                self.runs += 1
                failures = 0
                delay = self.next_delay(report)
                # A rest shorter than the interval is no rest: the next pass comes anyway.
                self._resting_for = rest if rest is not None and rest > self.interval else None
                if _nonzero(report):
                    log.info("%s: %s", self.name, report)
            except Exception as exc:
                failures += 1
                delay = backoff_delay(failures, 2 * self.interval, 30.0)
                log_failure(log, self.name, exc, f"retrying in {delay:.1f}s")


async def wait_set(event: asyncio.Event, seconds: float) -> bool:
    """Wait until `event` is set or `seconds` have passed; True if it is set. Unlike
    `asyncio.wait_for(event.wait(), seconds)` it starts no task per wait (an idle worker
    waits this way dozens of times a second: its guard, services, presence, heartbeat)."""
    if event.is_set():
        return True
    if seconds <= 0:
        return False
    try:
        async with asyncio.timeout(seconds):
            await event.wait()
    except TimeoutError:
        return False
    return True


def _nonzero(report: object) -> bool:
    values = getattr(report, "__dict__", {}).values()
    counted = (v for v in values if isinstance(v, int) and not isinstance(v, bool))
    return any(counted) or (isinstance(report, int) and report > 0)
