"""rota's PostgreSQL pools hand out the connection used last (drivers/postgres/pool.py):
a caller making one call at a time keeps to one warm connection instead of cycling
through the pool, which cost a single enqueue a fifth of its throughput."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest

from rota.drivers.postgres.pool import AsyncPool, Pool
from tests.conftest import PG_URL, require_postgres
from tests.proxy import TcpProxy

SIZE = 3


@pytest.fixture(autouse=True)
def _postgres() -> None:
    require_postgres()


def test_one_call_at_a_time_keeps_to_the_connection_used_last() -> None:
    with Pool(PG_URL, min_size=SIZE, max_size=SIZE, open=False) as pool:
        pool.wait(timeout=10)
        # All three in use at once, given back in an order, so that three are idle.
        held = [pool.getconn() for _ in range(SIZE)]
        for conn in held:
            pool.putconn(conn)
        last = held[-1]
        pids = []
        for _ in range(6):
            with pool.connection() as conn:
                pids.append(conn.info.backend_pid)
        assert pids == [last.info.backend_pid] * 6
        # With two in use, the second is the one given back just before.
        first, second = pool.getconn(), pool.getconn()
        assert first is last and second is held[-2]
        pool.putconn(second)
        pool.putconn(first)


def test_the_async_pool_keeps_to_the_connection_used_last() -> None:
    async def main() -> tuple[list[int], Any]:
        async with AsyncPool(PG_URL, min_size=SIZE, max_size=SIZE, open=False) as pool:
            await pool.wait(timeout=10)
            held = [await pool.getconn() for _ in range(SIZE)]
            for conn in held:
                await pool.putconn(conn)
            pids = []
            for _ in range(6):
                async with pool.connection() as conn:
                    pids.append(conn.info.backend_pid)
            return pids, held[-1].info.backend_pid

    pids, last = asyncio.run(main())
    assert pids == [last] * 6


def test_a_loop_that_ends_while_the_async_pool_connects_can_close() -> None:
    """The loop that owns the pool ends while a connect is under way (here one that never
    gets an answer, through a black hole): its cancellation ends the connect, and
    asyncio.run() returns, instead of psycopg_pool trying again for ever."""
    with TcpProxy(("127.0.0.1", 5432)) as proxy:
        proxy.blackhole()
        url = proxy.url(PG_URL)

        async def main() -> None:
            pool = AsyncPool(url, min_size=1, max_size=2, open=False, name="rota-test")
            await pool.open(wait=False)
            deadline = time.monotonic() + 5
            while proxy.accepted == 0 and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            assert proxy.accepted, "the pool never started connecting"
            await asyncio.sleep(0.2)  # the connect waits for an answer: end the loop now

        thread = threading.Thread(target=asyncio.run, args=(main(),), daemon=True)
        thread.start()
        thread.join(timeout=15)
        assert not thread.is_alive(), "asyncio.run() did not return: the connect was retried"
