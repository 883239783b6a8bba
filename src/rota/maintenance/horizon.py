"""HorizonWatch: the leader warns, once per transaction, when one holds PostgreSQL's xmin
horizon back longer than a threshold: while it does, VACUUM keeps every dead row version
newer than its snapshot, and rota_jobs and its indexes grow with each state change
(docs/operations.md#long-transactions). The same reading feeds a metric and the
dashboard's overview. SQLite has no such horizon: there it reads nothing."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import ClassVar

from rota.drivers.base import Driver
from rota.maintenance.service import PeriodicService

log = logging.getLogger("rota.maintenance")

# Seconds a transaction may hold the horizon before rota says so. A worker's own
# statements take milliseconds; a minute of dead row versions at thousands of state
# changes a second is already a bloated table.
HORIZON_THRESHOLD = 60.0


@dataclass(frozen=True)
class HorizonHolder:
    """A transaction that holds the xmin horizon: a session (`holder` is its pid) or a
    prepared transaction (`holder` is its gid), and for how long."""

    kind: str
    holder: str
    username: str | None
    application: str | None
    client: str | None
    state: str | None
    since: datetime
    age_s: float


def horizon_holders(driver: Driver) -> list[HorizonHolder] | None:
    """The oldest transactions holding the xmin horizon, oldest first (at most five);
    None on SQLite, which has none."""
    if driver.dialect != "postgres":
        return None
    db = driver.database
    return [
        HorizonHolder(
            kind=r["kind"],
            holder=r["holder"],
            username=r["username"],
            application=r["application"] or None,
            client=r["client"],
            state=r["state"],
            since=db.codec.instant(r["since"]),
            age_s=float(r["age_s"]),
        )
        for r in db.query("metrics_horizon")
    ]


@dataclass(frozen=True, slots=True)  # slots: no __dict__, so a pass is not logged
class HorizonReport:
    oldest_s: float | None  # None: nothing holds a snapshot (or SQLite)
    warned: int


class HorizonWatch(PeriodicService):
    name: ClassVar[str] = "horizon"

    def __init__(
        self, driver: Driver, interval: float = 15.0, threshold: float = HORIZON_THRESHOLD
    ) -> None:
        super().__init__(driver, interval)
        self.threshold = threshold
        self._warned: set[tuple[str, str, datetime]] = set()

    def run_once(self) -> HorizonReport:
        holders = horizon_holders(self.driver)
        if holders is None:
            return HorizonReport(None, 0)
        late = [h for h in holders if h.age_s >= self.threshold]
        seen = {(h.kind, h.holder, h.since) for h in late}
        warned = 0
        for h in late:
            key = (h.kind, h.holder, h.since)
            if key in self._warned:
                continue
            warned += 1
            log.warning(
                "%s %s %s (user %s, application %r, client %s, %s since %s) has held the "
                "xmin horizon for %.0fs: VACUUM cannot remove dead rows of rota_jobs while "
                "it lasts (docs/operations.md#long-transactions)",
                h.kind,
                "pid" if h.kind == "session" else "gid",
                h.holder,
                h.username,
                h.application or "",
                h.client or "local",
                h.state or "",
                h.since.isoformat(timespec="seconds"),
                h.age_s,
            )
        # Forget the ones that ended, so the set stays as small as what is open now.
        self._warned = seen
        return HorizonReport(holders[0].age_s if holders else None, warned)
