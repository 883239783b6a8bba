"""A real worker for the cron e2e test: leader election, the maintenance services and the
app's schedules (stored when it starts), with the cron service on the accelerated clock.
Usage: cron_worker.py WORKER_ID"""

from __future__ import annotations

import asyncio
import os
import sys

from cron_clock import accelerated

import rota
from rota.schedules.service import CronService
from rota.telemetry.logging import configure

SCHEDULES = int(os.environ.get("CRON_SCHEDULES", "40"))
DEADLINE = float(os.environ.get("CRON_DEADLINE", "120"))

app = rota.App()


@app.task(name="tick", queue="ticks")  # no worker serves "ticks": every run stays
def tick(schedule: int) -> None:
    pass


for number in range(SCHEDULES):
    app.schedule(
        tick,
        "* * * * *",
        args={"schedule": number},
        name=f"s{number:03}",
        starting_deadline=DEADLINE,
    )


async def main() -> None:
    settings = rota.WorkerSettings(
        queues={"default": 1},
        worker_id=sys.argv[1],
        leader_ttl=0.6,
        cron_interval=0.05,
        stage_interval=0.5,
        poll_interval=0.5,
        grace=1.0,
    )
    worker = rota.Worker(app, settings)
    for service in worker.services:
        if isinstance(service, CronService):
            service.clock = accelerated(app.driver)
    worker.install_signal_handlers()
    await worker.run()


if __name__ == "__main__":
    configure("info", "json")
    try:
        asyncio.run(main())
    finally:
        app.close()
