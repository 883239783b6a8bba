"""A cron expression in plain words ("every 5 minutes", "at 07:00 on weekdays") for the
dashboard and the API. The common shapes only; anything else is described as itself."""

from __future__ import annotations

from rota.errors import ScheduleError
from rota.schedules.spec import normalize_expression

_DAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTHS = [
    "",
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_NAMED_DAYS = {
    "1-5": "on weekdays",
    "mon-fri": "on weekdays",
    "0,6": "on weekends",
    "6,0": "on weekends",
    "6-7": "on weekends",
    "sat,sun": "on weekends",
}


def _plural(n: int, word: str) -> str:
    return f"{word}" if n == 1 else f"{n} {word}s"


def _every(step: str, word: str) -> str | None:
    if step.isdigit() and int(step) > 0:
        return "every " + _plural(int(step), word)
    return None


def _day_of_week(field: str) -> str | None:
    low = field.lower()
    if low in _NAMED_DAYS:
        return _NAMED_DAYS[low]
    parts = low.split(",")
    if all(p.isdigit() and int(p) <= 7 for p in parts):
        names = [_DAYS[int(p)] for p in parts]
        return "on " + (
            names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]
        )
    if "-" in low and low.count("-") == 1 and all(p.isdigit() for p in low.split("-")):
        first, last = (int(p) for p in low.split("-"))
        if first <= 7 and last <= 7:
            return f"{_DAYS[first]} to {_DAYS[last]}"
    return None


def _time(minute: str, hour: str) -> str | None:
    if minute.isdigit() and hour.isdigit():
        return f"at {int(hour):02d}:{int(minute):02d}"
    if minute.isdigit() and "," in hour and all(h.isdigit() for h in hour.split(",")):
        return "at " + ", ".join(f"{int(h):02d}:{int(minute):02d}" for h in hour.split(","))
    return None


def describe(expression: str) -> str:
    """`expression` in plain words, e.g. "every 5 minutes", "every day at 02:30",
    "at 07:00 on weekdays"; an expression of another shape as "cron <fields>"."""
    try:
        fields = normalize_expression(expression).split()
    except ScheduleError:
        return f"cron {expression}"
    if len(fields) != 5:
        return f"cron {expression}"
    minute, hour, dom, month, dow = fields
    fallback = f"cron {' '.join(fields)}"
    if dom == "*" and month == "*" and dow == "*":
        if hour == "*":
            if minute == "*":
                return "every minute"
            if minute.startswith("*/"):
                return _every(minute[2:], "minute") or fallback
            if minute.isdigit():
                return f"every hour at minute {int(minute)}"
            return fallback
        if hour.startswith("*/") and minute.isdigit():
            every = _every(hour[2:], "hour")
            return f"{every} at minute {int(minute)}" if every else fallback
        at = _time(minute, hour)
        return f"every day {at}" if at else fallback
    at = _time(minute, hour)
    if at is None:
        return fallback
    if dom == "*" and month == "*":
        if dow.isdigit() and int(dow) <= 7:
            return f"every {_DAYS[int(dow)]} {at}"
        days = _day_of_week(dow)
        return f"{at} {days}" if days else fallback
    if dow == "*" and dom.isdigit():
        if month == "*":
            return f"{at} on day {int(dom)} of every month"
        if month.isdigit() and 1 <= int(month) <= 12:
            return f"{at} on {_MONTHS[int(month)]} {int(dom)}"
    return fallback
