"""Processing windows: when a queue may start jobs, as wall-clock spans in a time zone
(`"01:00-05:00"`, `"Mon-Fri 22:00-02:00"`). Parsing, validation and the open/closed
decision; the hold service applies it (rota.ops.service)."""

from __future__ import annotations

import json
import re
import zoneinfo
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from rota.errors import ArgumentsError, RotaError
from rota.schedules.spec import load_zone

DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MAX_WINDOWS = 50
_SPAN = re.compile(
    r"^(?:(?P<days>[A-Za-z,\- ]+?)\s+)?(?P<start>\d{1,2}:\d{2})\s*-\s*(?P<end>\d{1,2}:\d{2})$"
)


@dataclass(frozen=True)
class Window:
    """One span of wall-clock time, `start` to `end` in minutes after midnight. An end at
    or before the start crosses midnight; `days` (0 = Monday) are the days the span
    starts on, None for every day."""

    start: int
    end: int  # 1..1440 (24:00)
    days: frozenset[int] | None = None

    @property
    def crosses_midnight(self) -> bool:
        return self.end <= self.start

    def __str__(self) -> str:
        span = f"{_hhmm(self.start)}-{_hhmm(self.end)}"
        if self.days is None:
            return span
        return f"{_days_text(self.days)} {span}"

    def contains(self, weekday: int, second_of_day: float) -> bool:
        """Whether the local time (weekday, seconds after midnight) lies in this window."""
        start, end = self.start * 60, self.end * 60
        if not self.crosses_midnight:
            return self._on(weekday) and start <= second_of_day < end
        # Before midnight on a listed day, or after midnight on the day after one.
        return (second_of_day >= start and self._on(weekday)) or (
            second_of_day < end and self._on((weekday - 1) % 7)
        )

    def _on(self, weekday: int) -> bool:
        return self.days is None or weekday in self.days


def _hhmm(minutes: int) -> str:
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def _days_text(days: frozenset[int]) -> str:
    return ",".join(DAY_NAMES[d].capitalize() for d in sorted(days))


def _minutes(text: str, spec: str, *, end: bool) -> int:
    hour, minute = (int(p) for p in text.split(":"))
    if minute > 59 or hour > 24 or (hour == 24 and (minute or not end)):
        allowed = "00:00 to 24:00" if end else "00:00 to 23:59"
        raise ArgumentsError(f"window {spec!r}: bad time {text!r} (use HH:MM, {allowed})")
    return hour * 60 + minute


def _days(text: str, spec: str) -> frozenset[int]:
    days: set[int] = set()
    for part in text.replace(" ", "").lower().split(","):
        first, _, last = part.partition("-")
        try:
            a = DAY_NAMES.index(first[:3]) if len(first) >= 3 else -1
            b = DAY_NAMES.index(last[:3]) if last else a
        except ValueError:
            a = b = -1
        if a < 0 or b < 0:
            raise ArgumentsError(
                f"window {spec!r}: bad day {part!r} (use Mon..Sun, ranges like Mon-Fri, "
                "lists like Sat,Sun)"
            )
        # A range may wrap the week: Fri-Mon is Fri, Sat, Sun, Mon.
        days.update((a + i) % 7 for i in range((b - a) % 7 + 1))
    return frozenset(days)


def parse_window(spec: object) -> Window:
    """`"01:00-05:00"`, `"22:00-02:00"` (crosses midnight), `"Mon-Fri 09:00-17:00"`,
    `"Sat,Sun 00:00-24:00"`."""
    if not isinstance(spec, str):
        raise ArgumentsError(f"a window is a string such as '01:00-05:00', not {spec!r}")
    match = _SPAN.match(spec.strip())
    if match is None:
        raise ArgumentsError(
            f"window {spec!r}: use [DAYS ]HH:MM-HH:MM, e.g. '01:00-05:00', "
            "'Mon-Fri 22:00-02:00' or 'Sat,Sun 00:00-24:00'"
        )
    start = _minutes(match["start"], spec, end=False)
    end = _minutes(match["end"], spec, end=True)
    if start == end:
        raise ArgumentsError(f"window {spec!r} has no length: for the whole day use '00:00-24:00'")
    days = _days(match["days"], spec) if match["days"] else None
    if days is not None and len(days) == 7:
        days = None
    return Window(start=start, end=end, days=days)


@dataclass(frozen=True)
class WindowSchedule:
    """A queue's processing windows in one time zone: open while any window is."""

    windows: tuple[Window, ...]
    tz: str

    @property
    def zone(self) -> zoneinfo.ZoneInfo:
        return zoneinfo.ZoneInfo(self.tz)

    def is_open(self, now: datetime) -> bool:
        """Whether jobs may start at `now` (aware). Wall-clock time decides, so on a day
        the clocks change a window keeps its local hours: 01:00-05:00 lasts three hours
        when spring skips 02:00-03:00, and five when autumn repeats 02:00-03:00."""
        local = now.astimezone(self.zone)
        second = local.hour * 3600 + local.minute * 60 + local.second + local.microsecond / 1e6
        return any(w.contains(local.weekday(), second) for w in self.windows)

    def next_change(self, now: datetime) -> datetime | None:
        """About when the queue next opens (if closed) or closes (if open), in UTC: the
        first window boundary after `now` that flips the decision. Informational: the
        service decides with is_open() on every pass."""
        state = self.is_open(now)
        zone = self.zone
        local_day = now.astimezone(zone).date()
        candidates: list[datetime] = []
        for offset in range(-1, 9):
            day = local_day + timedelta(days=offset)
            for w in self.windows:
                for minutes in (w.start, w.end if not w.crosses_midnight else w.end + 1440):
                    naive = datetime(day.year, day.month, day.day) + timedelta(minutes=minutes)
                    candidates.append(naive.replace(tzinfo=zone).astimezone(UTC))
        for at in sorted(set(candidates)):
            if at > now and self.is_open(at) != state:
                return at
        return None

    def describe(self) -> str:
        return f"{', '.join(str(w) for w in self.windows)} {self.tz}"

    def to_json(self) -> str:
        return json.dumps([str(w) for w in self.windows])


def window_schedule(windows: str | Iterable[str], tz: object = "UTC") -> WindowSchedule:
    """Validated windows: one string or several; `tz` an IANA zone name."""
    specs: Sequence[object] = [windows] if isinstance(windows, str) else list(windows)
    if not specs:
        raise ArgumentsError("give at least one window, e.g. '01:00-05:00' (or clear the windows)")
    if len(specs) > MAX_WINDOWS:
        raise ArgumentsError(f"at most {MAX_WINDOWS} windows per queue")
    try:
        load_zone(tz)
    except RotaError as exc:
        raise ArgumentsError(str(exc)) from None
    assert isinstance(tz, str)
    return WindowSchedule(windows=tuple(parse_window(s) for s in specs), tz=tz)


def schedule_from_json(windows_json: str, tz: str) -> WindowSchedule:
    """A stored schedule (written by WindowSchedule.to_json)."""
    return window_schedule(json.loads(windows_json), tz)
