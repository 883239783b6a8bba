"""Cron steps read as Kubernetes reads them (robfig/cron v3 `getRange`): `N/step` runs from
N to the end of the field, `N-M/step` from N to M, in every field and under both DST
policies. The reference below is a port of getRange; the ticks must match it (#17)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest

from rota.schedules import DstPolicy, Ticks, normalize_expression

# robfig/cron v3 bounds (parser.go): minute, hour, day-of-month, month, day-of-week.
BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 6))
NAMES = {
    3: {m: i + 1 for i, m in enumerate("JAN FEB MAR APR MAY JUN JUL AUG SEP OCT NOV DEC".split())},
    4: {d: i for i, d in enumerate("SUN MON TUE WED THU FRI SAT".split())},
}


def robfig_range(expr: str, field: int) -> set[int]:
    """getRange from robfig/cron v3 parser.go, for one comma-separated part."""
    low, high = BOUNDS[field]
    names = NAMES.get(field, {})

    def value(text: str) -> int:
        return names[text] if text in names else int(text)

    range_part, _, step_text = expr.partition("/")
    ends = range_part.split("-")
    if ends[0] in ("*", "?"):
        start, end = low, high
    else:
        start = value(ends[0])
        end = value(ends[1]) if len(ends) == 2 else start
    step = int(step_text) if step_text else 1
    if step_text and len(ends) == 1:
        end = high  # "N/step" means "N-max/step"
    assert low <= start <= end <= high, f"robfig rejects {expr!r}"
    return set(range(start, end + 1, step))


def robfig_field(text: str, field: int) -> set[int]:
    values: set[int] = set()
    for part in text.upper().split(","):
        values |= robfig_range(part, field)
    return values


# One `N/step` and one `N-M/step` (and a named one where the field has names) per field;
# the other fields are fixed so the window below holds several ticks.
CASES = [
    ("7/15 0 * * *", 0),
    ("10-40/7 0 * * *", 0),
    ("0 1/5 * * *", 1),
    ("0 3-20/4 * * *", 1),
    ("0 0 2/9 * *", 2),
    ("0 0 5-25/6 * *", 2),
    ("0 0 1 2/5 *", 3),
    ("0 0 1 FEB/4 *", 3),
    ("0 0 1 3-11/3 *", 3),
    ("0 0 * * 1/2", 4),
    ("0 0 * * MON/2", 4),
    ("0 0 * * 0/3", 4),
    ("0 0 * * 6/2", 4),
    ("0 0 * * 2-5/2", 4),
    ("0 0 * * TUE-SAT/2", 4),
]


def fields_of(moment: datetime) -> tuple[int, int, int, int, int]:
    return (
        moment.minute,
        moment.hour,
        moment.day,
        moment.month,
        (moment.weekday() + 1) % 7,
    )


@pytest.mark.parametrize("dst", [DstPolicy.ONCE, DstPolicy.KUBERNETES])
@pytest.mark.parametrize(("expression", "field"), CASES)
def test_steps_match_robfig_in_every_field(expression: str, field: int, dst: DstPolicy) -> None:
    parts = expression.split()
    expected = robfig_field(parts[field], field)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    # Long enough for every value of the field to come round: three years for months.
    window = timedelta(days=3 * 366) if field == 3 else timedelta(days=62)
    ticks = Ticks(normalize_expression(expression), ZoneInfo("UTC"), dst)
    seen = []
    for tick in ticks.iter_after(start):
        if tick > start + window:
            break
        seen.append(tick)
    assert {fields_of(t)[field] for t in seen} == expected
    # And nothing else: every tick's other fields are the fixed ones, and consecutive
    # ticks leave out no matching instant (checked against the reference day by day).
    reference = [
        moment
        for moment in _reference_ticks(parts, start, start + window)
        if moment > start  # iter_after is strictly after
    ]
    assert seen == reference


def _reference_ticks(parts: list[str], start: datetime, end: datetime) -> list[datetime]:
    sets = [robfig_field(text, i) for i, text in enumerate(parts)]
    star_dom = parts[2] in ("*", "?")
    star_dow = parts[4] in ("*", "?")
    out = []
    day = start.replace(hour=0, minute=0)
    while day <= end:
        dom_ok = day.day in sets[2]
        dow_ok = (day.weekday() + 1) % 7 in sets[4]
        # robfig: with either day field a star both must match, else either may.
        day_ok = (dom_ok and dow_ok) if (star_dom or star_dow) else (dom_ok or dow_ok)
        if day.month in sets[3] and day_ok:
            for hour in sorted(sets[1]):
                for minute in sorted(sets[0]):
                    moment = day.replace(hour=hour, minute=minute)
                    if moment <= end:
                        out.append(moment)
        day += timedelta(days=1)
    return out


@pytest.mark.parametrize("dst", [DstPolicy.ONCE, DstPolicy.KUBERNETES])
def test_day_of_week_1_step_2_is_monday_wednesday_friday_never_sunday(dst: DstPolicy) -> None:
    """The case from the issue: `rota cron next "0 0 * * 1/2"` showed a Sunday."""
    ticks = Ticks(normalize_expression("0 0 * * 1/2"), ZoneInfo("Europe/Berlin"), dst)
    days = []
    for tick in ticks.iter_after(datetime(2026, 11, 30, tzinfo=UTC)):
        days.append(tick.astimezone(ZoneInfo("Europe/Berlin")).strftime("%a %d"))
        if len(days) == 6:
            break
    assert days == ["Wed 02", "Fri 04", "Mon 07", "Wed 09", "Fri 11", "Mon 14"]


@pytest.mark.parametrize(
    ("expression", "cron"),
    [
        ("0 0 * * 1/2", "0 0 * * 1-6/2"),
        ("0 0 * * mon/2", "0 0 * * MON-6/2"),
        ("5/15 * * * *", "5-59/15 * * * *"),
        ("0 2/3 * * *", "0 2-23/3 * * *"),
        ("0 0 3/7 * *", "0 0 3-31/7 * *"),
        ("0 0 1 2/5 *", "0 0 1 2-12/5 *"),
        ("0,30/10 * * * *", "0,30-59/10 * * * *"),
        # Ranges, stars and plain values are unchanged.
        ("0 0 * * 1-5/2", "0 0 * * 1-5/2"),
        ("*/5 * * * *", "*/5 * * * *"),
    ],
)
def test_single_value_steps_are_spelled_as_ranges(expression: str, cron: str) -> None:
    assert normalize_expression(expression) == cron
