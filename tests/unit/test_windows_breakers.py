"""Processing windows and breaker decisions as pure logic: midnight, days of the week,
the two DST days of Europe/Berlin, and every breaker verdict."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from rota.errors import ArgumentsError
from rota.ops.breakers import BreakerConfig, should_open, trial_verdict
from rota.ops.windows import parse_window, window_schedule


def berlin(y: int, mo: int, d: int, h: int, mi: int = 0) -> datetime:
    """A UTC instant given as Berlin wall-clock time (the first one when it repeats)."""
    from zoneinfo import ZoneInfo

    return datetime(y, mo, d, h, mi, tzinfo=ZoneInfo("Europe/Berlin")).astimezone(UTC)


def open_minutes(windows: list[str], tz: str, start: datetime, hours: int) -> int:
    """Real minutes the schedule is open in [start, start + hours)."""
    schedule = window_schedule(windows, tz)
    return sum(schedule.is_open(start + timedelta(minutes=m)) for m in range(hours * 60))


def test_a_plain_window_and_its_edges() -> None:
    s = window_schedule("01:00-05:00", "Europe/Berlin")
    assert not s.is_open(berlin(2026, 6, 1, 0, 59))
    assert s.is_open(berlin(2026, 6, 1, 1, 0))
    assert s.is_open(berlin(2026, 6, 1, 4, 59))
    assert not s.is_open(berlin(2026, 6, 1, 5, 0))  # the end is exclusive
    assert s.next_change(berlin(2026, 6, 1, 12)) == berlin(2026, 6, 2, 1)
    assert s.next_change(berlin(2026, 6, 2, 2)) == berlin(2026, 6, 2, 5)


def test_a_window_crossing_midnight_belongs_to_the_day_it_starts() -> None:
    s = window_schedule("Fri 22:00-02:00", "UTC")  # 2026-06-05 is a Friday
    assert s.is_open(datetime(2026, 6, 5, 23, 0, tzinfo=UTC))
    assert s.is_open(datetime(2026, 6, 6, 1, 59, tzinfo=UTC))  # Saturday morning
    assert not s.is_open(datetime(2026, 6, 6, 2, 0, tzinfo=UTC))
    assert not s.is_open(datetime(2026, 6, 6, 23, 0, tzinfo=UTC))  # Saturday night: no
    assert not s.is_open(datetime(2026, 6, 5, 1, 0, tzinfo=UTC))  # Friday early: Thursday's


def test_days_ranges_lists_and_several_windows() -> None:
    s = window_schedule(["Mon-Fri 09:00-17:00", "sat,SUN 10:00-12:00"], "UTC")
    monday = datetime(2026, 6, 1, tzinfo=UTC)
    assert [s.is_open(monday + timedelta(days=d, hours=10, minutes=30)) for d in range(7)] == [
        True
    ] * 7
    assert [s.is_open(monday + timedelta(days=d, hours=15)) for d in range(7)] == (
        [True] * 5 + [False] * 2
    )
    assert str(parse_window("Fri-Mon 00:00-24:00")) == "Mon,Fri,Sat,Sun 00:00-24:00"
    assert str(parse_window("Mon-Sun 01:00-02:00")) == "01:00-02:00"  # every day


def test_dst_days_keep_wall_clock_hours() -> None:
    # 2026-03-29: Berlin skips 02:00-03:00, so 01:00-05:00 lasts three real hours.
    assert open_minutes(["01:00-05:00"], "Europe/Berlin", berlin(2026, 3, 28, 12), 24) == 180
    # 2026-10-25: Berlin repeats 02:00-03:00, so 01:00-05:00 lasts five real hours.
    assert open_minutes(["01:00-05:00"], "Europe/Berlin", berlin(2026, 10, 24, 12), 24) == 300
    # A window inside the skipped hour does not happen that day ...
    assert open_minutes(["02:00-02:30"], "Europe/Berlin", berlin(2026, 3, 28, 12), 24) == 0
    # ... and one inside the repeated hour happens twice.
    assert open_minutes(["02:00-02:30"], "Europe/Berlin", berlin(2026, 10, 24, 12), 24) == 60
    # On an ordinary day: four hours.
    assert open_minutes(["01:00-05:00"], "Europe/Berlin", berlin(2026, 6, 1, 12), 24) == 240


@pytest.mark.parametrize(
    ("spec", "text"),
    [
        ("24:00-05:00", "bad time"),
        ("01:00-24:01", "bad time"),
        ("01:61-02:00", "bad time"),
        ("03:00-03:00", "no length"),
        ("3-5", "HH:MM"),
        ("Mo 01:00-02:00", "bad day"),
        ("Mon-Xyz 01:00-02:00", "bad day"),
        ("", "HH:MM"),
        (5, "a string"),
    ],
)
def test_bad_windows_say_how_to_fix_them(spec: object, text: str) -> None:
    with pytest.raises(ArgumentsError, match=text):
        parse_window(spec)


def test_unknown_zone_suggests_close_names() -> None:
    with pytest.raises(ArgumentsError, match="Europe/Berlin"):
        window_schedule("01:00-02:00", "Europe/Berln")


def test_breaker_decisions() -> None:
    config = BreakerConfig(threshold=0.5, min_attempts=20, window=60, cooldown=30)
    assert not should_open(config, 19, 19)  # too few attempts to judge
    assert should_open(config, 20, 10)  # exactly the threshold
    assert not should_open(config, 20, 9)
    assert should_open(BreakerConfig(threshold=1.0, min_attempts=1), 1, 1)
    assert trial_verdict(None) is None
    assert trial_verdict("completed") == "close"
    assert [trial_verdict(o) for o in ("failed", "discarded", "lost")] == ["reopen"] * 3
    assert [trial_verdict(o) for o in ("snoozed", "cancelled", "shutdown")] == ["retry"] * 3
