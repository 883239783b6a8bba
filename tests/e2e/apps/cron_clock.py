"""The accelerated clock of the cron e2e tests: the database clock, run `CRON_SPEED` times
faster from `CRON_ANCHOR` (the same for every process, so all of them agree on `now`)."""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime

from rota.drivers.base import Driver


def accelerated(driver: Driver) -> Callable[[], datetime]:
    anchor = datetime.fromisoformat(os.environ["CRON_ANCHOR"])
    speed = float(os.environ["CRON_SPEED"])

    def now() -> datetime:
        return anchor + (driver.db_now() - anchor) * speed

    return now
