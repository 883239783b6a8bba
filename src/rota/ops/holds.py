"""`app.queues` processing windows and circuit breakers (mixed into QueueControls):
`app.queues.set_window("reports", "01:00-05:00", tz="Europe/Berlin")`,
`app.queues.set_breaker("mail", threshold=0.5, min_attempts=20, window=60, cooldown=30)`."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from rota.drivers.base import QueueHold
from rota.errors import ArgumentsError
from rota.labels import check_queue_name
from rota.ops.breakers import BreakerConfig
from rota.ops.hold_model import BreakerRecord
from rota.ops.hold_store import HoldStore
from rota.ops.service import apply_window, close_breaker
from rota.ops.windows import WindowSchedule, schedule_from_json, window_schedule

if TYPE_CHECKING:
    from rota.app import App


class WindowsAndBreakers:
    """Windows and breakers of queues; changes apply at once and the leader's hold
    service keeps them applied (docs/operations.md#processing-windows)."""

    _app: App

    # --- processing windows ------------------------------------------------------------

    def set_window(
        self, name: str, windows: str | Iterable[str], *, tz: str = "UTC"
    ) -> WindowSchedule:
        """Start jobs of `name` only inside `windows` (wall-clock spans in `tz`), e.g.
        `"01:00-05:00"`, `["Mon-Fri 22:00-02:00", "Sat,Sun 00:00-24:00"]`. Outside them
        nothing new starts; running jobs finish."""
        check_queue_name(name, ArgumentsError)
        schedule = window_schedule(windows, tz)
        driver = self._app.driver
        HoldStore(driver).window_put(name, schedule.to_json(), schedule.tz)
        apply_window(driver, name, schedule, datetime.now(UTC))
        return schedule

    def clear_window(self, name: str) -> bool:
        """Let `name` run around the clock again; False when it had no windows."""
        check_queue_name(name, ArgumentsError)
        driver = self._app.driver
        found = HoldStore(driver).window_drop(name)
        apply_window(driver, name, None, datetime.now(UTC))
        return found

    def window(self, name: str) -> WindowSchedule | None:
        """The processing windows of `name`, or None (it runs around the clock)."""
        check_queue_name(name, ArgumentsError)
        for record in HoldStore(self._app.driver).window_list():
            if record.queue == name:
                return schedule_from_json(record.windows_json, record.tz)
        return None

    # --- circuit breakers ---------------------------------------------------------------

    def set_breaker(
        self,
        name: str,
        *,
        threshold: float = 0.5,
        min_attempts: int = 20,
        window: float = 60.0,
        cooldown: float = 30.0,
    ) -> BreakerRecord:
        """Open a breaker on `name` when at least `threshold` (0.5: half) of at least
        `min_attempts` attempts started in the last `window` seconds failed: the queue
        is held for `cooldown` seconds, then one trial job runs; its success closes the
        breaker, its failure opens it again. Changing the settings keeps the state."""
        check_queue_name(name, ArgumentsError)
        config = BreakerConfig(threshold, min_attempts, window, cooldown)
        holds = HoldStore(self._app.driver)
        holds.breaker_configure(
            name, float(config.threshold), config.min_attempts, config.window, config.cooldown
        )
        return holds.breaker_list(name)[0]

    def clear_breaker(self, name: str) -> bool:
        """Remove the breaker of `name` (releasing its hold); False when it had none."""
        check_queue_name(name, ArgumentsError)
        driver = self._app.driver
        found = HoldStore(driver).breaker_list(name)
        if found:
            close_breaker(driver, found[0], driver.db_now(), "removed by an operator")
        dropped = HoldStore(driver).breaker_drop(name)
        driver.queue_hold_drop(name, "breaker")
        return dropped

    def reset_breaker(self, name: str) -> BreakerRecord:
        """Close the breaker of `name` now (the downstream is known to be back)."""
        check_queue_name(name, ArgumentsError)
        driver = self._app.driver
        found = HoldStore(driver).breaker_list(name)
        if not found:
            raise ArgumentsError(f"queue {name!r} has no circuit breaker: set one first")
        return close_breaker(driver, found[0], driver.db_now(), "reset by an operator")

    def breaker(self, name: str) -> BreakerRecord | None:
        """The breaker of `name` (settings and state), or None."""
        check_queue_name(name, ArgumentsError)
        found = HoldStore(self._app.driver).breaker_list(name)
        return found[0] if found else None

    def breakers(self) -> list[BreakerRecord]:
        return HoldStore(self._app.driver).breaker_list(None)

    # --- holds ----------------------------------------------------------------------------

    def holds(self, name: str | None = None) -> list[QueueHold]:
        """Why queues are paused: one hold per source (manual, window, breaker)."""
        if name is not None:
            check_queue_name(name, ArgumentsError)
        return self._app.driver.queue_hold_list(name)
