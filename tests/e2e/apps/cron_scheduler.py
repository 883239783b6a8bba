"""A bare scheduler process for the cron e2e test: cron passes back to back with no leader
gate, so several of these race for every tick, until the accelerated clock reaches
`CRON_END`; then it prints its totals as JSON. Usage: cron_scheduler.py NAME"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import asdict
from datetime import datetime

from cron_clock import accelerated

import rota
from rota.schedules.service import CronService


def main() -> None:
    app = rota.App()
    clock = accelerated(app.driver)
    end = datetime.fromisoformat(os.environ["CRON_END"])
    service = CronService(app.driver, 0.01, scheduler=sys.argv[1], clock=clock)
    totals: dict[str, int] = {}
    while clock() < end:
        for key, value in asdict(service.run_once()).items():
            totals[key] = totals.get(key, 0) + value
        time.sleep(0.005)  # the pass interval, as a tiny cron_interval would give
    app.close()
    print(json.dumps(totals), flush=True)


if __name__ == "__main__":
    main()
