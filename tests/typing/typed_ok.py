"""Typed enqueue that mypy --strict must accept (tests/typing/test_typing.py)."""

from __future__ import annotations

from datetime import UTC, datetime

import rota

app = rota.App("sqlite:///typed.db")


@app.task(queue="mail")
def send_welcome(ctx: rota.Context, user_id: int, queue: str = "en") -> None:
    """`queue` is the task's own argument (a template language), not the option."""


@app.task
def resize(path: str, key: str, width: int = 640) -> str:
    return f"{path}@{width}"


async def produce() -> None:
    job: rota.Job = send_welcome.options(key="welcome-1", delay=60).enqueue(user_id=1)
    send_welcome.options(queue="mail-eu").enqueue(2, "de")
    send_welcome.options().enqueue(user_id=3, queue="fr")
    resize.options(priority=-5, at=datetime.now(UTC)).enqueue("a.png", key="k1", width=100)
    again: rota.Job = await resize.options(tenant="acme").enqueue_async("b.png", "k2")
    many: list[rota.Job] = send_welcome.options(queue="bulk").enqueue_many(
        [{"user_id": 4}, {"user_id": 5}]
    )
    many += await send_welcome.options().enqueue_many_async([{"user_id": 6}])
    # Today's call keeps working (untyped arguments).
    send_welcome.enqueue(user_id=7, key="welcome-7")
    await send_welcome.enqueue_async(user_id=8)
    print(job.id, again.id, len(many), resize("c.png", "k3"))
