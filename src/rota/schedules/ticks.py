"""Tick computation: when a cron expression fires in a time zone, under one of two DST
policies. `once` is cronsim's own iteration; `kubernetes` is robfig/cron v3's `Next`,
walked over the same parsed fields (cronsim parses; nothing here reads cron syntax)."""

from __future__ import annotations

import enum
import functools
import heapq
import math
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim


class DstPolicy(enum.StrEnum):
    """How a schedule treats local times that are skipped or repeated (SEMANTICS §1.3)."""

    # A skipped local time runs once at the first valid instant after the gap; a repeated
    # one runs once, at its first occurrence. Schedules whose minute or hour field starts
    # with `*` (hourly and finer) run at every real matching instant instead (Vixie cron).
    ONCE = "once"
    # robfig/cron v3, as Kubernetes runs it: a skipped local time does not run that day,
    # and a repeated one runs at both of its occurrences.
    KUBERNETES = "kubernetes"


class Ticks:
    """The fire times of one normalised 5-field expression in one zone, as UTC instants."""

    def __init__(self, cron: str, zone: ZoneInfo, dst: DstPolicy = DstPolicy.ONCE) -> None:
        self.cron = cron
        self.zone = zone
        self.dst = DstPolicy(dst)
        if self.dst is DstPolicy.KUBERNETES:
            self._robfig = _RobfigFields(cron)
        minute, hour = cron.split()[:2]
        # cronsim's rule for "fixed-time" schedules, walked in local time (Vixie cron's).
        self.fixed_time = not minute.startswith("*") and not hour.startswith("*")

    def __repr__(self) -> str:
        return f"<Ticks {self.cron!r} in {self.zone.key} dst={self.dst}>"

    def next_after(self, after: datetime) -> datetime | None:
        """The first fire time strictly after `after` (None: it never fires again)."""
        return next(self.iter_after(after), None)

    def iter_after(self, after: datetime) -> Iterator[datetime]:
        """Fire times strictly after `after`, in order."""
        if after.tzinfo is None:
            raise ValueError("pass a timezone-aware datetime")
        if self.dst is DstPolicy.KUBERNETES:
            return self._iter_robfig(after)
        return self._iter_cronsim(after)

    def latest_in(self, earliest: datetime, now: datetime) -> datetime | None:
        """The latest fire time t with earliest < t <= now, without walking every tick in
        between (a schedule that fires each minute and was down for a year is cheap)."""
        first = self.next_after(earliest)
        if first is None or first > now:
            return None
        second = self.next_after(first)
        if second is None or second > now:
            return first
        interval = second - first
        span = 2
        while True:
            start = max(earliest, now - interval * span)
            found = self.next_after(start)
            if found is not None and found <= now:
                last = found
                for tick in self.iter_after(found):
                    if tick > now:
                        break
                    last = tick
                return last
            # Irregular schedules (`0 0 29 2 *`) can have no tick in a short window: widen it.
            span *= 4

    # --- `once`: cronsim -------------------------------------------------------------------

    def _iter_cronsim(self, after: datetime) -> Iterator[datetime]:
        if not self.fixed_time and _irregular(self.zone):
            return self._iter_real_instants(after)
        return self._iter_cronsim_walk(after)

    def _iter_cronsim_walk(self, after: datetime) -> Iterator[datetime]:
        # cronsim walks fixed-time schedules in naive local time, which loses the fold of
        # `after`: from 01:15 EST (the second 01:15 of a fall-back day) it would offer 01:30
        # EDT again, which is earlier. Ticks never go backwards, so skip those.
        sim = CronSim(self.cron, after.astimezone(self.zone))
        last = after
        while True:
            try:
                tick = next(sim).astimezone(UTC)
            except StopIteration:
                return
            if tick > last:
                last = tick
                yield tick

    def _iter_real_instants(self, after: datetime) -> Iterator[datetime]:
        """Every real instant whose local time matches, for schedules that are not fixed-time,
        in zones whose clocks change other than on a whole local hour or at local midnight.
        cronsim steps hours on the real clock: after Lord Howe's 30-minute change it lands
        on :30 and skips `*/15 9 * * *`'s 09:00 and 09:15; at Chatham's change at 02:45 it
        goes back in time and cycles; entering a day whose midnight the clock skips
        (America/Sao_Paulo, 2018-11-04) it offers the skipped 00:00 itself, so `* 0 * * 0`
        would run at 01:00 on the clock. So walk the matching local times instead (cronsim
        without a zone: the plain calendar) and map each to the instants that show it: none
        in a gap, two in an overlap."""
        lag = timedelta(seconds=_max_shift(self.zone) + 60)
        wall = after.astimezone(self.zone).replace(tzinfo=None) - lag
        pending: list[tuple[datetime, datetime]] = []  # (instant, its local time)
        seen: set[datetime] = set()
        for local in CronSim(self.cron, wall):
            for fold in (0, 1):
                instant = local.replace(tzinfo=self.zone, fold=fold).astimezone(UTC)
                shown = instant.astimezone(self.zone).replace(tzinfo=None)
                if shown == local and instant > after and instant not in seen:
                    seen.add(instant)
                    heapq.heappush(pending, (instant, local))
            # Instants of later local times can come before these by at most one clock
            # change: release the ones no later local time can precede.
            while pending and pending[0][1] < local - lag:
                yield heapq.heappop(pending)[0]
        while pending:
            yield heapq.heappop(pending)[0]

    # --- `kubernetes`: robfig/cron v3 SpecSchedule.Next --------------------------------------

    def _iter_robfig(self, after: datetime) -> Iterator[datetime]:
        seconds = math.floor(after.timestamp())
        while True:
            found = self._robfig.next(self.zone, seconds)
            if found is None:
                return
            if found <= seconds:
                # robfig's hour walk can go back in time where a change is not on a whole
                # local hour (Chatham's 02:45); ticks must move forward, so take the next
                # real matching instant there instead.
                start = datetime.fromtimestamp(seconds, UTC)
                fallback = next(self._iter_real_instants(start), None)
                if fallback is None:
                    return
                found = int(fallback.timestamp())
            yield datetime.fromtimestamp(found, UTC)
            seconds = found


class _RobfigFields:
    """The bit sets robfig's SpecSchedule holds, taken from cronsim's parse."""

    def __init__(self, cron: str) -> None:
        sim = CronSim(cron, datetime(2000, 1, 1, tzinfo=UTC))
        self.minutes = frozenset(sim.minutes)
        self.hours = frozenset(sim.hours)
        self.days = frozenset(d for d in sim.days if isinstance(d, int) and d > 0)
        self.months = frozenset(sim.months)
        # cronsim allows 7 for Sunday; robfig counts Sunday as 0 only.
        self.weekdays = frozenset(d % 7 for d in sim.weekdays if isinstance(d, int))
        # The expression is normalised (spec.normalize_expression) so that a day field
        # starting with `*` is exactly robfig's star bit.
        self.day_and = sim.day_and

    def day_matches(self, wall: datetime) -> bool:
        dom = wall.day in self.days
        dow = (wall.weekday() + 1) % 7 in self.weekdays
        return (dom and dow) if self.day_and else (dom or dow)

    def next(self, zone: ZoneInfo, after: int) -> int | None:
        """robfig/cron v3 `Next` (spec.go) on Unix seconds: walk the wall-clock fields in
        `zone`, adding months and days on the calendar and hours, minutes and seconds on the
        real clock, with Go's rules for local times that do not exist or exist twice."""
        t = after + 1  # "the upcoming second"
        added = False
        year_limit = _wall(t, zone).year + 5
        while True:  # WRAP
            w = _wall(t, zone)
            if w.year > year_limit:
                return None
            wrapped = False
            while w.month not in self.months:
                if not added:
                    added = True
                    t = _go_date(zone, w.year, w.month, 1)
                    w = _wall(t, zone)
                t = _go_date(zone, w.year, w.month + 1, w.day, w.hour, w.minute, w.second)
                w = _wall(t, zone)
                if w.month == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while not self.day_matches(w):
                if not added:
                    added = True
                    t = _go_date(zone, w.year, w.month, w.day)
                    w = _wall(t, zone)
                t = _go_date(zone, w.year, w.month, w.day + 1, w.hour, w.minute, w.second)
                w = _wall(t, zone)
                # robfig: "Notice if the hour is no longer midnight due to DST."
                if w.hour != 0:
                    t += (24 - w.hour) * 3600 if w.hour > 12 else -w.hour * 3600
                    w = _wall(t, zone)
                if w.day == 1:
                    wrapped = True
                    break
            if wrapped:
                continue
            while w.hour not in self.hours:
                if not added:
                    added = True
                    t = _go_date(zone, w.year, w.month, w.day, w.hour)
                t += 3600
                w = _wall(t, zone)
                if w.hour == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while w.minute not in self.minutes:
                if not added:
                    added = True
                    t -= t % 60  # Go's Truncate works on absolute time
                t += 60
                w = _wall(t, zone)
                if w.minute == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            while w.second != 0:  # the seconds field of a 5-field spec is 0
                added = True
                t += 1
                w = _wall(t, zone)
                if w.second == 0:
                    wrapped = True
                    break
            if wrapped:
                continue
            return t


@functools.cache
def _transitions(zone: ZoneInfo) -> tuple[tuple[int, int, int], ...]:
    """The zone's offset changes from 1970 to 2100 as (Unix second, offset before, offset
    after): sampled daily, each pinned to the second by bisection. Computed once per zone."""
    found = []
    day = 86_400
    t = 0
    previous = _offset(t, zone)
    for _ in range(47_500):
        offset = _offset(t + day, zone)
        if offset != previous:
            lo, hi = t, t + day  # the change happens in (lo, hi]
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if _offset(mid, zone) == previous:
                    lo = mid
                else:
                    hi = mid
            found.append((hi, previous, offset))
            previous = offset
        t += day
    return tuple(found)


@functools.cache
def _irregular(zone: ZoneInfo) -> bool:
    """Whether some change of the zone's clocks is not on a whole local hour (Lord Howe's
    30-minute shift; Chatham's change at 02:45) or falls at local midnight (Sao Paulo's):
    cronsim's and robfig's hour walks go wrong at the first, cronsim's day step at the
    second."""
    return any(
        (at + before) % 3600 or (at + after) % 3600 or (at + before) % 86_400 == 0
        for at, before, after in _transitions(zone)
    )


def _max_shift(zone: ZoneInfo) -> int:
    return max((abs(after - before) for _, before, after in _transitions(zone)), default=0)


def _wall(seconds: int, zone: ZoneInfo) -> datetime:
    return datetime.fromtimestamp(seconds, zone)


_EPOCH = datetime(1970, 1, 1)


def _go_date(
    zone: ZoneInfo, year: int, month: int, day: int, hour: int = 0, minute: int = 0, sec: int = 0
) -> int:
    """Go's `time.Date` in Unix seconds: out-of-range fields carry over, and a local time
    that does not exist or exists twice is resolved the way Go resolves it (take the
    offset in force at the wall time read as UTC; if that offset does not hold at the
    resulting instant, use the one that does)."""
    year += (month - 1) // 12
    month = (month - 1) % 12 + 1
    wall = datetime(year, month, 1) + timedelta(
        days=day - 1, hours=hour, minutes=minute, seconds=sec
    )
    as_utc = int((wall - _EPOCH).total_seconds())
    offset = _offset(as_utc, zone)
    utc = as_utc - offset
    second_offset = _offset(utc, zone)
    if second_offset != offset:
        utc = as_utc - second_offset
    return utc


def _offset(seconds: int, zone: ZoneInfo) -> int:
    delta = _wall(seconds, zone).utcoffset()
    assert delta is not None
    return int(delta.total_seconds())
