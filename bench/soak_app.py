"""The app the soak's workers load (`bench/soak.py`): one async task that sleeps a while,
so heartbeats keep renewing running jobs while other jobs' completions are written."""

from __future__ import annotations

import asyncio
import os

import rota

LINGER = "soak.linger"


def register(app: rota.App) -> None:
    @app.task(name=LINGER, queue="soak")
    async def linger(n: int, ms: int) -> None:
        await asyncio.sleep(ms / 1000)


app = rota.App(os.environ.get("ROTA_DATABASE_URL", "sqlite:///unused-soak.db"))
register(app)
