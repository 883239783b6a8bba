"""Typed enqueue that mypy --strict must refuse, on each line marked `# error`."""

from __future__ import annotations

import rota

app = rota.App("sqlite:///typed.db")


@app.task(queue="mail")
def send_welcome(ctx: rota.Context, user_id: int, queue: str = "en") -> None: ...


@app.task
def resize(path: str, width: int = 640) -> str:
    return path


async def produce() -> None:
    send_welcome.options().enqueue(user_id="one")  # error: a str for an int
    send_welcome.options().enqueue(userid=1)  # error: no such parameter
    send_welcome.options().enqueue()  # error: user_id missing
    send_welcome.options(delay="soon").enqueue(user_id=1)  # error: delay is a number
    send_welcome.options().enqueue(app, user_id=1)  # error: the context is not passed
    resize.options().enqueue("a.png", 1, 2)  # error: too many arguments
    job: rota.Job = resize.options().enqueue_async("a.png")  # error: not awaited
    print(job)
