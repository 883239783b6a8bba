"""`wait_set`: the wait of every idle loop of a worker (its guard, services, presence,
heartbeat, fetchers), without a task per wait."""

from __future__ import annotations

import asyncio
import time

import pytest

from rota.maintenance.service import wait_set


def test_it_returns_true_at_once_when_the_event_is_set() -> None:
    async def main() -> tuple[bool, float]:
        event = asyncio.Event()
        event.set()
        started = time.monotonic()
        return await wait_set(event, 10.0), time.monotonic() - started

    got, took = asyncio.run(main())
    assert got is True and took < 0.5


def test_it_wakes_when_the_event_is_set_while_it_waits() -> None:
    async def main() -> tuple[bool, float]:
        event = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, event.set)
        started = time.monotonic()
        return await wait_set(event, 10.0), time.monotonic() - started

    got, took = asyncio.run(main())
    assert got is True and 0.04 <= took < 2.0


def test_it_returns_false_after_the_timeout() -> None:
    async def main() -> tuple[bool, float, bool]:
        event = asyncio.Event()
        started = time.monotonic()
        got = await wait_set(event, 0.05)
        return got, time.monotonic() - started, await wait_set(event, 0)

    got, took, at_once = asyncio.run(main())
    assert got is False and 0.04 <= took < 2.0
    assert at_once is False


def test_a_cancel_from_outside_is_not_taken_for_a_timeout() -> None:
    async def main() -> None:
        event = asyncio.Event()
        waiting = asyncio.create_task(wait_set(event, 10.0))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting

    asyncio.run(main())


def test_it_starts_no_task_of_its_own() -> None:
    async def main() -> int:
        event = asyncio.Event()
        seen: list[int] = []
        asyncio.get_running_loop().call_later(0.02, lambda: seen.append(len(asyncio.all_tasks())))
        await wait_set(event, 0.05)
        return seen[0]

    # Only main() itself: asyncio.wait_for(event.wait(), ...) would count two.
    assert asyncio.run(main()) == 1
