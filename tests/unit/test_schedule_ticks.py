"""Tick computation through DST changes, under both policies (SEMANTICS §1.3).

A controllable clock walks the CronJob decision minute by minute through spring-forward and
fall-back days in America/New_York, Europe/Berlin and Australia/Lord_Howe (a 30-minute
shift); hypothesis checks the tick arithmetic against cronsim's own iteration and against
a brute-force reading of "every real instant whose local time matches"."""

from __future__ import annotations

import dataclasses
import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from cronsim import CronSim
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from rota.schedules import DstPolicy, ScheduleSpec, ScheduleState, Ticks, reconcile
from rota.schedules.spec import normalize_expression

ONCE, K8S = DstPolicy.ONCE, DstPolicy.KUBERNETES


def controller_runs(
    expression: str, zone: str, day: str, dst: DstPolicy, step: float = 60.0
) -> list[str]:
    """Drive the CronJob decision with a fake clock from the local midnight before `day` to
    the one after, one pass every `step` seconds, starting each run it asks for; return the
    runs as local RFC 3339 times."""
    tz = ZoneInfo(zone)
    start = datetime.fromisoformat(day).replace(tzinfo=tz).astimezone(UTC)
    end = (datetime.fromisoformat(day) + timedelta(days=1)).replace(tzinfo=tz).astimezone(UTC)
    spec = ScheduleSpec("s", expression, timezone=zone, dst=dst)
    state = ScheduleState(created_at=start - timedelta(seconds=1))
    runs = []
    now = start
    while now < end:
        decision = reconcile(spec, state, now)
        if decision.start is not None:
            runs.append(spec.local(decision.start))
            state = dataclasses.replace(state, last_schedule_time=decision.start)
        now += timedelta(seconds=step)
    return runs


# (zone, local day, expression, runs with dst="once", runs with dst="kubernetes")
DST_CASES = [
    # America/New_York, spring forward 2025-03-09: 02:00 EST jumps to 03:00 EDT.
    ("America/New_York", "2025-03-09", "30 2 * * *", ["2025-03-09T03:00:00-04:00"], []),
    ("America/New_York", "2025-03-09", "0 2 * * *", ["2025-03-09T03:00:00-04:00"], []),
    (
        "America/New_York",
        "2025-03-09",
        "0 * * * *",
        ["T00:00:00-05:00", "T01:00:00-05:00", "T03:00:00-04:00", "T04:00:00-04:00"],
        ["T00:00:00-05:00", "T01:00:00-05:00", "T03:00:00-04:00", "T04:00:00-04:00"],
    ),
    # America/New_York, fall back 2025-11-02: 02:00 EDT goes back to 01:00 EST.
    (
        "America/New_York",
        "2025-11-02",
        "30 1 * * *",
        ["2025-11-02T01:30:00-04:00"],
        ["2025-11-02T01:30:00-04:00", "2025-11-02T01:30:00-05:00"],
    ),
    (
        "America/New_York",
        "2025-11-02",
        "0 * * * *",
        ["T00:00:00-04:00", "T01:00:00-04:00", "T01:00:00-05:00", "T02:00:00-05:00"],
        ["T00:00:00-04:00", "T01:00:00-04:00", "T01:00:00-05:00", "T02:00:00-05:00"],
    ),
    # Europe/Berlin, last Sunday of March: 02:00 CET jumps to 03:00 CEST.
    ("Europe/Berlin", "2025-03-30", "0 2 * * *", ["2025-03-30T03:00:00+02:00"], []),
    ("Europe/Berlin", "2025-03-30", "30 2 * * *", ["2025-03-30T03:00:00+02:00"], []),
    (
        "Europe/Berlin",
        "2025-03-30",
        "0 3 * * *",
        ["2025-03-30T03:00:00+02:00"],
        ["2025-03-30T03:00:00+02:00"],
    ),
    (
        "Europe/Berlin",
        "2025-03-30",
        "0 * * * *",
        ["T00:00:00+01:00", "T01:00:00+01:00", "T03:00:00+02:00", "T04:00:00+02:00"],
        ["T00:00:00+01:00", "T01:00:00+01:00", "T03:00:00+02:00", "T04:00:00+02:00"],
    ),
    # Europe/Berlin, last Sunday of October: 03:00 CEST goes back to 02:00 CET.
    (
        "Europe/Berlin",
        "2025-10-26",
        "0 2 * * *",
        ["2025-10-26T02:00:00+02:00"],
        ["2025-10-26T02:00:00+02:00", "2025-10-26T02:00:00+01:00"],
    ),
    (
        "Europe/Berlin",
        "2025-10-26",
        "30 2 * * *",
        ["2025-10-26T02:30:00+02:00"],
        ["2025-10-26T02:30:00+02:00", "2025-10-26T02:30:00+01:00"],
    ),
    (
        "Europe/Berlin",
        "2025-10-26",
        "0 3 * * *",
        ["2025-10-26T03:00:00+01:00"],
        ["2025-10-26T03:00:00+01:00"],
    ),
    (
        "Europe/Berlin",
        "2025-10-26",
        "0 * * * *",
        ["T01:00:00+02:00", "T02:00:00+02:00", "T02:00:00+01:00", "T03:00:00+01:00"],
        ["T01:00:00+02:00", "T02:00:00+02:00", "T02:00:00+01:00", "T03:00:00+01:00"],
    ),
    # Australia/Lord_Howe, spring forward 2025-10-05: 02:00 (+10:30) jumps to 02:30 (+11).
    ("Australia/Lord_Howe", "2025-10-05", "15 2 * * *", ["2025-10-05T02:30:00+11:00"], []),
    (
        "Australia/Lord_Howe",
        "2025-10-05",
        "45 2 * * *",
        ["2025-10-05T02:45:00+11:00"],
        ["2025-10-05T02:45:00+11:00"],
    ),
    (
        "Australia/Lord_Howe",
        "2025-10-05",
        "*/30 * * * *",
        ["T01:00:00+10:30", "T01:30:00+10:30", "T02:30:00+11:00", "T03:00:00+11:00"],
        ["T01:00:00+10:30", "T01:30:00+10:30", "T02:30:00+11:00", "T03:00:00+11:00"],
    ),
    # Australia/Lord_Howe, fall back 2025-04-06: 02:00 (+11) goes back to 01:30 (+10:30).
    (
        "Australia/Lord_Howe",
        "2025-04-06",
        "45 1 * * *",
        ["2025-04-06T01:45:00+11:00"],
        ["2025-04-06T01:45:00+11:00", "2025-04-06T01:45:00+10:30"],
    ),
    (
        "Australia/Lord_Howe",
        "2025-04-06",
        "15 1 * * *",
        ["2025-04-06T01:15:00+11:00"],
        ["2025-04-06T01:15:00+11:00"],
    ),
    (
        "Australia/Lord_Howe",
        "2025-04-06",
        "0 * * * *",
        ["T00:00:00+11:00", "T01:00:00+11:00", "T02:00:00+10:30", "T03:00:00+10:30"],
        ["T00:00:00+11:00", "T01:00:00+11:00", "T02:00:00+10:30", "T03:00:00+10:30"],
    ),
    (
        "Australia/Lord_Howe",
        "2025-04-06",
        "*/30 * * * *",
        ["T01:00:00+11:00", "T01:30:00+11:00", "T01:30:00+10:30", "T02:00:00+10:30"],
        ["T01:00:00+11:00", "T01:30:00+11:00", "T01:30:00+10:30", "T02:00:00+10:30"],
    ),
]


@pytest.mark.parametrize("dst", [ONCE, K8S])
@pytest.mark.parametrize(
    ("zone", "day", "expression", "once", "kubernetes"),
    DST_CASES,
    ids=[f"{c[0].split('/')[-1]}-{c[1]}-{c[2].replace(' ', '_')}" for c in DST_CASES],
)
def test_dst_transitions_under_both_policies(
    zone: str, day: str, expression: str, once: list[str], kubernetes: list[str], dst: DstPolicy
) -> None:
    expected = once if dst is ONCE else kubernetes
    runs = controller_runs(expression, zone, day, dst)
    if expected and expected[0].startswith("T"):
        # Hourly and finer: every real matching instant, the same under both policies;
        # the expectation lists the ones around the change.
        expected = [day + t for t in expected]
        assert all(t in runs for t in expected), runs
        first, last = runs.index(expected[0]), runs.index(expected[-1])
        assert runs[first : last + 1] == expected
        assert len(runs) == len(set(runs))
    else:
        assert runs == expected


def test_the_section_1_3_rows_for_new_york() -> None:
    # Library facts of SEMANTICS §1.3, through Ticks directly.
    ny = ZoneInfo("America/New_York")
    start = datetime(2025, 3, 8, 12, tzinfo=ny)

    def firsts(expression: str, dst: DstPolicy, after: datetime, n: int) -> list[str]:
        ticks = Ticks(normalize_expression(expression), ny, dst).iter_after(after)
        return [next(ticks).astimezone(ny).isoformat() for _ in range(n)]

    assert firsts("30 2 * * *", ONCE, start, 2) == [
        "2025-03-09T03:00:00-04:00",
        "2025-03-10T02:30:00-04:00",
    ]
    assert firsts("30 2 * * *", K8S, start, 1) == ["2025-03-10T02:30:00-04:00"]
    fall = datetime(2025, 11, 1, 12, tzinfo=ny)
    assert firsts("30 1 * * *", ONCE, fall, 2) == [
        "2025-11-02T01:30:00-04:00",
        "2025-11-03T01:30:00-05:00",
    ]
    assert firsts("30 1 * * *", K8S, fall, 3) == [
        "2025-11-02T01:30:00-04:00",
        "2025-11-02T01:30:00-05:00",
        "2025-11-03T01:30:00-05:00",
    ]


def test_next_after_a_repeated_time_never_goes_back() -> None:
    # 01:15 EST comes after 01:30 EDT: the next `30 1 * * *` is the next day's, not 01:30 EDT.
    ny = ZoneInfo("America/New_York")
    after = datetime(2025, 11, 2, 6, 15, tzinfo=UTC)  # 01:15 EST, the second 01:15
    ticks = Ticks("30 1 * * *", ny, ONCE)
    assert ticks.next_after(after) == datetime(2025, 11, 3, 6, 30, tzinfo=UTC)


def test_once_does_not_lose_runs_after_a_30_minute_change() -> None:
    # cronsim steps hours on the real clock for schedules that are not fixed-time; after
    # Lord Howe's 30-minute fall-back that lands on :30 and skips 09:00 and 09:15. The once
    # policy promises every real matching instant, so rota walks local times there instead.
    lhi = ZoneInfo("Australia/Lord_Howe")
    after = datetime(2025, 4, 5, 9, 50, tzinfo=lhi)
    expression = "*/15 9 * * *"
    skipped = []
    for tick in CronSim(expression, after):
        if tick >= datetime(2025, 4, 7, tzinfo=lhi):
            break
        if tick.day == 6:
            skipped.append(tick.strftime("%d %H:%M"))
    assert skipped == ["06 09:30", "06 09:45"]  # cronsim 2.x: if this changes, revisit
    ours = Ticks(expression, lhi, ONCE).iter_after(after)
    day = [next(ours).astimezone(lhi).strftime("%d %H:%M%z") for _ in range(5)]
    assert day == [
        "06 09:00+1030",
        "06 09:15+1030",
        "06 09:30+1030",
        "06 09:45+1030",
        "07 09:00+1030",
    ]


def test_once_never_goes_back_in_time_where_cronsim_cycles() -> None:
    # Chatham's clocks go back at 03:45 (+13:45) to 02:45 (+12:45). From 03:26, cronsim's
    # `* 3 * * *` walk reaches 03:59 and jumps back to 03:00 (+13:45), forever. rota walks
    # local times there: each real minute with hour 3, once, in order.
    chatham = ZoneInfo("Pacific/Chatham")
    after = datetime(2025, 4, 5, 13, 40, tzinfo=UTC)  # 03:25 +13:45
    sim = CronSim("* 3 * * *", after.astimezone(chatham))
    theirs = [next(sim).astimezone(UTC) for _ in range(40)]
    assert theirs[19] < theirs[18]  # cronsim 2.x goes back: if this changes, revisit
    ours = Ticks("* 3 * * *", chatham, ONCE).iter_after(after)
    day = [next(ours) for _ in range(19 + 60 + 1)]
    assert all(a < b for a, b in itertools.pairwise(day))
    local = [t.astimezone(chatham).strftime("%H:%M%z") for t in day]
    assert local[0] == "03:26+1345" and local[18] == "03:44+1345"  # then the change
    assert local[19] == "03:00+1245" and local[78] == "03:59+1245"
    assert day[79].astimezone(chatham).strftime("%d %H:%M") == "07 03:00"


def test_once_does_not_run_a_finer_schedule_at_a_skipped_midnight() -> None:
    # Sao Paulo's clocks jumped from 00:00 (-03) to 01:00 (-02) on Sunday 2018-11-04: hour 0
    # never showed that day. Entering the day, cronsim offers the skipped 00:00 itself for
    # `* 0 * * 0` (01:00 on the clock); a schedule that is not fixed-time runs only when the
    # clock shows a matching time, so its next run is the next Sunday's 00:00.
    sao_paulo = ZoneInfo("America/Sao_Paulo")
    after = datetime(2018, 11, 4, 2, 59, tzinfo=UTC)  # 23:59 -03 on Saturday
    skipped = next(CronSim("* 0 * * 0", after.astimezone(sao_paulo)))
    assert skipped.astimezone(UTC) == datetime(2018, 11, 4, 3, tzinfo=UTC)  # cronsim 2.x
    ours = Ticks("* 0 * * 0", sao_paulo, ONCE).iter_after(after)
    assert next(ours).astimezone(sao_paulo).isoformat() == "2018-11-11T00:00:00-02:00"
    # The same instant is kept where the clock shows a match, and a fixed time in the gap
    # still moves to the first valid minute after it.
    for expression in ("*/30 * * * *", "*/15 0-1 * * *", "10 0 * * *"):
        first = next(Ticks(expression, sao_paulo, ONCE).iter_after(after))
        assert first.astimezone(sao_paulo).isoformat() == "2018-11-04T01:00:00-02:00"


def test_kubernetes_keeps_robfigs_hour_walk_after_a_30_minute_change() -> None:
    # robfig's Next adds whole real hours while looking for the hour; after Lord Howe's
    # 30-minute fall-back that walk lands on :30, so `0 12 * * *` has no run that day.
    # dst="kubernetes" reproduces robfig exactly, this included (spec.go, hour loop).
    lhi = ZoneInfo("Australia/Lord_Howe")
    ticks = Ticks("0 12 * * *", lhi, K8S).iter_after(datetime(2025, 4, 5, 12, tzinfo=lhi))
    assert [next(ticks).astimezone(lhi).strftime("%m-%d %H:%M") for _ in range(2)] == [
        "04-07 12:00",
        "04-08 12:00",
    ]
    once = Ticks("0 12 * * *", lhi, ONCE).iter_after(datetime(2025, 4, 5, 12, tzinfo=lhi))
    assert next(once).astimezone(lhi).strftime("%m-%d %H:%M") == "04-06 12:00"


def test_latest_in_finds_the_most_recent_tick_without_walking_them_all() -> None:
    ticks = Ticks("* * * * *", ZoneInfo("UTC"))
    earliest = datetime(2020, 1, 1, tzinfo=UTC)
    now = datetime(2025, 6, 1, 10, 21, 30, tzinfo=UTC)
    assert ticks.latest_in(earliest, now) == datetime(2025, 6, 1, 10, 21, tzinfo=UTC)
    leap = Ticks("0 0 29 2 *", ZoneInfo("UTC"))
    assert leap.latest_in(earliest, now) == datetime(2024, 2, 29, tzinfo=UTC)
    assert leap.latest_in(datetime(2024, 3, 1, tzinfo=UTC), now) is None


# --- properties -----------------------------------------------------------------------------

ZONES = [
    "UTC",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "Pacific/Chatham",  # +12:45 / +13:45
    "Asia/Kolkata",  # +05:30, no DST
    "America/Sao_Paulo",
]
# Local days with a DST change in 2025 (and one ordinary day), to start windows near them.
TRANSITION_DAYS = {
    "UTC": ["2025-06-01"],
    "America/New_York": ["2025-03-09", "2025-11-02"],
    "Europe/Berlin": ["2025-03-30", "2025-10-26"],
    "Australia/Lord_Howe": ["2025-04-06", "2025-10-05"],
    "Pacific/Chatham": ["2025-04-06", "2025-09-28"],
    "Asia/Kolkata": ["2025-06-01"],
    "America/Sao_Paulo": ["2018-11-04", "2019-02-17"],  # its last DST changes, at midnight
}


@st.composite
def cron_field(
    draw: st.DrawFn, lo: int, hi: int, star_weight: int = 1, top: int | None = None
) -> tuple[str, set[int]]:
    """One field as text, with the set of values it means (written independently of any
    parser, so the brute-force oracle below does not trust cronsim's parse). Values are
    drawn from lo-hi; `*` means lo-top."""
    kind = draw(st.sampled_from(["star"] * star_weight + ["value", "range", "step", "list"]))
    if kind == "star":
        return "*", set(range(lo, (top or hi) + 1))
    if kind == "value":
        value = draw(st.integers(lo, hi))
        return str(value), {value}
    if kind == "range":
        a = draw(st.integers(lo, hi))
        b = draw(st.integers(a, hi))
        return f"{a}-{b}", set(range(a, b + 1))
    if kind == "step":
        step = draw(st.integers(2, max(2, (hi - lo) // 2)))
        if draw(st.booleans()):
            return f"*/{step}", set(range(lo, (top or hi) + 1, step))
        a = draw(st.integers(lo, hi))
        return f"{a}-{hi}/{step}", set(range(a, hi + 1, step))
    values = draw(st.sets(st.integers(lo, hi), min_size=2, max_size=4))
    return ",".join(map(str, sorted(values))), values


@st.composite
def cron(draw: st.DrawFn) -> tuple[str, dict[str, object]]:
    minute = draw(cron_field(0, 59))
    hour = draw(cron_field(0, 23, star_weight=2))
    dom = draw(cron_field(1, 28, star_weight=4, top=31))
    month = draw(cron_field(1, 12, star_weight=8))
    dow = draw(cron_field(0, 6, star_weight=4))
    text = " ".join(f[0] for f in (minute, hour, dom, month, dow))
    meaning: dict[str, object] = {
        "minute": minute[1],
        "hour": hour[1],
        "dom": dom[1],
        "month": month[1],
        "dow": dow[1],
        # Kubernetes' rule: both day fields restricted (neither is `*`) means either matches.
        "day_or": dom[0] != "*" and dow[0] != "*",
        "fixed": not minute[0].startswith("*") and not hour[0].startswith("*"),
    }
    return text, meaning


def matches(meaning: dict[str, object], wall: datetime) -> bool:
    dom = wall.day in meaning["dom"]  # type: ignore[operator]
    dow = (wall.weekday() + 1) % 7 in meaning["dow"]  # type: ignore[operator]
    day = (dom or dow) if meaning["day_or"] else (dom and dow)
    return (
        day
        and wall.minute in meaning["minute"]  # type: ignore[operator]
        and wall.hour in meaning["hour"]  # type: ignore[operator]
        and wall.month in meaning["month"]  # type: ignore[operator]
    )


@st.composite
def window(draw: st.DrawFn, zones: list[str] = ZONES) -> tuple[str, datetime]:
    zone = draw(st.sampled_from(zones))
    day = datetime.fromisoformat(draw(st.sampled_from(TRANSITION_DAYS[zone])))
    offset = draw(st.integers(-36 * 60, 12 * 60))  # minutes around the local midnight
    seconds = draw(st.integers(0, 59))
    start = day.replace(tzinfo=ZoneInfo(zone)) + timedelta(minutes=offset, seconds=seconds)
    return zone, start.astimezone(UTC)


def take(ticks: Ticks, start: datetime, end: datetime) -> list[datetime]:
    out = []
    for tick in ticks.iter_after(start):
        if tick > end:
            break
        out.append(tick)
    return out


# Zones whose clocks change on a whole local hour, away from midnight. Elsewhere (Lord
# Howe's 30-minute change, Chatham's at 02:45, Sao Paulo's at midnight) robfig's walk
# depends on where it starts and skips runs; dst="kubernetes" keeps that, on purpose.
ROBFIG_REGULAR = ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata"]

PROPERTY = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@PROPERTY
@given(cron(), window())
def test_once_is_cronsims_iteration(case: tuple[str, dict[str, object]], at: tuple) -> None:
    text, meaning = case
    zone, start = at
    # Except where cronsim's walk goes wrong for schedules that are not fixed-time: clocks
    # that change other than on a whole local hour, and a skipped midnight (see the tests
    # on Lord Howe, Chatham and Sao Paulo above).
    assume(
        meaning["fixed"]
        or zone not in ("Australia/Lord_Howe", "Pacific/Chatham", "America/Sao_Paulo")
    )
    expression = normalize_expression(text)
    ours = take(Ticks(expression, ZoneInfo(zone), ONCE), start, start + timedelta(days=3))
    theirs = []
    for tick in CronSim(expression, start.astimezone(ZoneInfo(zone))):
        utc = tick.astimezone(UTC)
        if utc > start + timedelta(days=3):
            break
        if utc > start:  # cronsim may offer the first occurrence again from a repeated hour
            theirs.append(utc)
    assert ours == theirs


@PROPERTY
@given(cron(), window(), st.floats(0, 1))
def test_next_after_is_consistent_between_ticks(
    case: tuple[str, dict[str, object]], at: tuple, fraction: float
) -> None:
    # For any instant t between two consecutive ticks a <= t < b, next_after(t) is b: the
    # ticks are one fixed set, whatever instant the scheduler happens to look from.
    text, _ = case
    zone, start = at
    for dst in (ONCE, K8S) if zone in ROBFIG_REGULAR else (ONCE,):
        ticks = Ticks(normalize_expression(text), ZoneInfo(zone), dst)
        found = take(ticks, start, start + timedelta(days=2))
        pairs = list(itertools.pairwise(found))
        assert all(a < b for a, b in pairs)
        # Every pair whose spacing is unusual (where the clocks change), and an even sample.
        usual = Counter(b - a for a, b in pairs).most_common(1)
        odd = [(a, b) for a, b in pairs if usual and b - a != usual[0][0]]
        for a, b in odd + pairs[:: max(1, len(pairs) // 40)]:
            t = a + (b - a) * fraction
            if t >= b:
                continue
            assert ticks.next_after(t) == b


@PROPERTY
@given(cron(), window(zones=ROBFIG_REGULAR))
def test_kubernetes_runs_every_real_instant_whose_local_time_matches(
    case: tuple[str, dict[str, object]], at: tuple
) -> None:
    # robfig/cron's walk, where clocks change on whole local hours away from midnight, is
    # exactly: each real minute whose wall-clock time in the zone matches the fields.
    text, meaning = case
    zone, start = at
    tz = ZoneInfo(zone)
    end = start + timedelta(days=1)
    ticks = Ticks(normalize_expression(text), tz, K8S)
    first = int(start.timestamp()) // 60 + 1
    brute = [
        datetime.fromtimestamp(m * 60, UTC)
        for m in range(first, int(end.timestamp()) // 60 + 1)
        if matches(meaning, datetime.fromtimestamp(m * 60, tz))
    ]
    assert take(ticks, start, end) == brute


@PROPERTY
@given(cron(), window())
def test_once_runs_each_local_time_once(case: tuple[str, dict[str, object]], at: tuple) -> None:
    # The default policy, read independently of cronsim: a fixed-time schedule runs each
    # matching local time once, at its first occurrence, or, if the clock skipped it, at
    # the first valid instant after the gap; finer schedules run at every real instant.
    text, meaning = case
    zone, start = at
    tz = ZoneInfo(zone)
    end = start + timedelta(days=1)
    expected: set[datetime] = set()
    if meaning["fixed"]:
        wall = start.astimezone(tz).replace(tzinfo=None, second=0) - timedelta(hours=3)
        while wall <= end.astimezone(tz).replace(tzinfo=None) + timedelta(hours=3):
            if matches(meaning, wall):
                moved = wall
                while (
                    moved.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None)
                    != moved
                ):  # in the gap: walk to the first valid local minute
                    moved += timedelta(minutes=1)
                expected.add(moved.replace(tzinfo=tz, fold=0).astimezone(UTC))
            wall += timedelta(minutes=1)
    else:
        first = int(start.timestamp()) // 60 + 1
        for m in range(first, int(end.timestamp()) // 60 + 1):
            if matches(meaning, datetime.fromtimestamp(m * 60, tz)):
                expected.add(datetime.fromtimestamp(m * 60, UTC))
    wanted = sorted(t for t in expected if start < t <= end)
    assert take(Ticks(normalize_expression(text), tz, ONCE), start, end) == wanted


@PROPERTY
@given(cron(), st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2090, 1, 1)))
def test_both_policies_agree_where_clocks_do_not_change(
    case: tuple[str, dict[str, object]], start: datetime
) -> None:
    text, _ = case
    expression = normalize_expression(text)
    for zone in ("UTC", "Asia/Kolkata"):
        tz = ZoneInfo(zone)
        begin = start.replace(tzinfo=UTC)
        a = take(Ticks(expression, tz, ONCE), begin, begin + timedelta(days=3))
        b = take(Ticks(expression, tz, K8S), begin, begin + timedelta(days=3))
        assert a == b
