"""ScheduleSpec: a schedule's cron expression, time zone and CronJob policy, validated once.
cronsim parses the expression; this module only spells out what Kubernetes accepts and
cronsim does not (macros, `?`), and refuses what Kubernetes would not run."""

from __future__ import annotations

import difflib
import enum
import math
import re
import secrets
import warnings
import zoneinfo
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import TypeVar

from cronsim import CronSim, CronSimError

from rota.errors import ScheduleError
from rota.schedules.ticks import DstPolicy, Ticks

E = TypeVar("E", bound=enum.StrEnum)


class ConcurrencyPolicy(enum.StrEnum):
    """What a due tick does while an earlier scheduled run is still active (§1.6)."""

    ALLOW = "allow"  # start it anyway: runs may overlap
    FORBID = "forbid"  # skip it; the most recent missed tick starts when the run ends
    REPLACE = "replace"  # cancel the active runs, then start it


class ScheduleWarning(UserWarning):
    """A schedule that is valid but probably not what was meant."""


MACROS: dict[str, str] = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}

FIELDS = ("minute", "hour", "day-of-month", "month", "day-of-week")
_ALLOWED = {
    "minute": "0-59",
    "hour": "0-23",
    "day-of-month": "1-31",
    "month": "1-12 or JAN-DEC",
    "day-of-week": "0-6 or SUN-SAT",
}
_DOM, _DOW = 2, 4
_FULL_RANGE = {_DOM: "1-31", _DOW: "0-6"}
# The largest value of each field in robfig/cron (Kubernetes): day-of-week ends at 6
# (Saturday), where cronsim also accepts 7 for Sunday.
_FIELD_MAX = ("59", "23", "31", "12", "6")
MAX_HISTORY_LIMIT = 100_000
MAX_NAME_LENGTH = 200
# Kubernetes' controller checks every 10 s, so shorter deadlines may never start a run.
SHORT_DEADLINE = 10.0


def normalize_expression(expression: object) -> str:
    """The 5-field form cronsim evaluates, or ScheduleError saying what is wrong.

    Macros become their fields; `?` becomes `*`; a single value with a step (`1/2`) is
    spelled as the range up to the field's end (`1-6/2`), as robfig/cron reads it (cronsim
    would run day-of-week `1/2` up to 7, which is Sunday again); and a day field that
    restricts days with a step over the whole range (`*/2`) is spelled as a range
    (`1-31/2`), because the Kubernetes parser treats it as a restriction (day-of-month and
    day-of-week then match with OR) while cronsim, like Vixie cron, would treat anything
    starting with `*` as a wildcard (AND)."""
    if not isinstance(expression, str):
        raise ScheduleError(f"a cron expression is a string, not {type(expression).__name__}")
    text = expression.strip()
    if not text:
        raise ScheduleError(
            "the cron expression is empty: use 5 fields such as '0 3 * * *', or a macro "
            "such as '@daily'"
        )
    head = text.split(None, 1)[0]
    if head.upper().startswith(("TZ=", "CRON_TZ=")):
        zone = head.partition("=")[2]
        raise ScheduleError(
            f"{expression!r}: TZ= and CRON_TZ= prefixes are not supported; pass the zone "
            f"separately, e.g. tz={zone!r}"
        )
    if text.startswith("@"):
        macro = text.lower()
        if macro in MACROS:
            return MACROS[macro]
        if macro.startswith("@every"):
            raise ScheduleError(
                f"{expression!r}: @every is not supported; use a 5-field expression, e.g. "
                "'*/5 * * * *' for every 5 minutes"
            )
        raise ScheduleError(f"unknown macro {expression!r}; the macros are {', '.join(MACROS)}")
    fields = text.upper().split()
    if len(fields) != 5:
        raise ScheduleError(
            f"{expression!r} has {len(fields)} field(s); a cron expression has 5: minute, "
            "hour, day-of-month, month, day-of-week (seconds are not supported)"
        )
    fields = [_single_steps(field, index) for index, field in enumerate(fields)]
    for index in (_DOM, _DOW):
        fields[index] = _day_field(fields[index], index, expression)
    cron = " ".join(fields)
    _check(cron, expression)
    return cron


def _single_steps(field: str, index: int) -> str:
    """`N/step` -> `N-max/step` in every part of `field` (robfig/cron's getRange: a step
    after a single value runs to the end of the field)."""
    parts = []
    for part in field.split(","):
        head, slash, step = part.partition("/")
        single = slash and head not in ("*", "?") and "-" not in head
        parts.append(f"{head}-{_FIELD_MAX[index]}/{step}" if single else part)
    return ",".join(parts)


def _day_field(field: str, index: int, expression: str) -> str:
    parts = field.split(",")
    for part in parts:
        head = part.partition("/")[0]
        nonstandard = (index == _DOM and ("L" in head or "W" in head)) or (
            index == _DOW and ("#" in head or (head.endswith("L") and head[:-1].isdigit()))
        )
        if nonstandard:
            raise ScheduleError(
                f"{expression!r}: {FIELDS[index]} {part!r} is not standard cron (L, W and # "
                "are extensions Kubernetes rejects)"
            )
    if any(_is_star(part) for part in parts):
        return "*"
    return ",".join(
        _FULL_RANGE[index] + part[1:] if part[:2] in ("*/", "?/") else part for part in parts
    )


def _is_star(part: str) -> bool:
    head, _, step = part.partition("/")
    return head in ("*", "?") and step in ("", "1")


# Any instant works: validation only needs cronsim to parse and find one tick.
_REFERENCE = datetime(2000, 1, 1, tzinfo=UTC)


def _check(cron: str, expression: str) -> None:
    try:
        sim = CronSim(cron, _REFERENCE)
    except CronSimError as exc:
        raise ScheduleError(_explain(cron, expression, str(exc))) from None
    try:
        next(sim)
    except StopIteration:
        raise ScheduleError(f"{expression!r} never fires: no matching time exists") from None


def _explain(cron: str, expression: str, message: str) -> str:
    fields = cron.split()
    original = expression.split()
    shown = original if len(original) == len(fields) else fields
    name = message.removeprefix("Bad ")
    if name not in FIELDS:
        return f"invalid cron expression {expression!r}: {message}"
    index = FIELDS.index(name)
    if name == "day-of-month":
        try:
            CronSim(" ".join([*fields[:3], "*", fields[4]]), _REFERENCE)
        except CronSimError:
            pass
        else:
            # The day parses, but none of the listed months has it: Kubernetes accepts this
            # and then fails every pass; we refuse it up front (SEMANTICS §1.2).
            return (
                f"{expression!r} never fires: day {fields[_DOM]} does not occur in month(s) "
                f"{fields[3]}"
            )
    return (
        f"invalid cron expression {expression!r}: bad {name} field {shown[index]!r} "
        f"(allowed: {_ALLOWED[name]}, with * , - and /)"
    )


def load_zone(name: object) -> zoneinfo.ZoneInfo:
    """The zone named `name` (IANA), or ScheduleError with the closest known names."""
    if not isinstance(name, str) or not name.strip():
        raise ScheduleError(
            f"tz must be an IANA time zone name such as 'Europe/Berlin' or 'UTC', not {name!r}"
        )
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        close = difflib.get_close_matches(name, zoneinfo.available_timezones(), n=3)
        hint = f" Did you mean {', '.join(map(repr, close))}?" if close else ""
        raise ScheduleError(
            f"unknown time zone {name!r}: use an IANA name such as 'Europe/Berlin', "
            f"'America/New_York' or 'UTC'.{hint}"
        ) from None


def check_schedule_name(name: object) -> str:
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= MAX_NAME_LENGTH
        or not name.isprintable()
        or any(c.isspace() for c in name)
    ):
        raise ScheduleError(
            f"bad schedule name {name!r}: use 1-{MAX_NAME_LENGTH} printable characters "
            "without spaces"
        )
    return name


def check_run_name(schedule: str, name: str | None) -> str:
    """The name of a manual run: `name`, checked, or a fresh `<schedule>-manual-<hex>`."""
    if name is None:
        return f"{schedule}-manual-{secrets.token_hex(4)}"
    if (
        not isinstance(name, str)
        or not 1 <= len(name) <= MAX_NAME_LENGTH
        or not name.isprintable()
        or any(c.isspace() for c in name)
    ):
        raise ScheduleError(
            f"bad run name {name!r}: use 1-{MAX_NAME_LENGTH} printable characters without spaces"
        )
    if re.fullmatch(re.escape(schedule) + r"-\d+", name):
        raise ScheduleError(
            f"run name {name!r} has the form of a scheduled run (<schedule>-<minute>); pick another"
        )
    return name


def parse_choice(kind: type[E], value: object, what: str) -> E:
    try:
        # Kubernetes spells them `Forbid`, `Replace`: accept any case.
        return kind(str(value).lower())
    except ValueError:
        known = ", ".join(repr(m.value) for m in kind)
        raise ScheduleError(f"{what} must be one of {known}, not {value!r}") from None


@dataclass(frozen=True)
class ScheduleSpec:
    """When a schedule fires and what it does about late, missed and overlapping runs.

    Field names follow Kubernetes CronJob (SEMANTICS §1.1), in snake case."""

    name: str
    expression: str
    timezone: str = "UTC"
    dst: DstPolicy = DstPolicy.ONCE
    concurrency: ConcurrencyPolicy = ConcurrencyPolicy.ALLOW
    starting_deadline: float | None = None  # seconds; None: no deadline
    successful_history_limit: int = 3
    failed_history_limit: int = 1
    # More than 100 missed ticks: warn and start the most recent (the controller's code), or,
    # with this set, warn and start nothing (what the Kubernetes docs describe).
    strict_missed_limit: bool = False

    def __post_init__(self) -> None:
        check_schedule_name(self.name)
        object.__setattr__(self, "dst", parse_choice(DstPolicy, self.dst, "dst"))
        object.__setattr__(
            self, "concurrency", parse_choice(ConcurrencyPolicy, self.concurrency, "concurrency")
        )
        self.cron  # noqa: B018  (validates the expression)
        self.zone  # noqa: B018
        deadline = self.starting_deadline
        if deadline is not None:
            if (
                not isinstance(deadline, int | float)
                or isinstance(deadline, bool)
                or not math.isfinite(deadline)
                or deadline <= 0
            ):
                raise ScheduleError(
                    f"starting_deadline must be a positive number of seconds or None, "
                    f"not {deadline!r}"
                )
            object.__setattr__(self, "starting_deadline", float(deadline))
        for what in ("successful_history_limit", "failed_history_limit"):
            value = getattr(self, what)
            if (
                not isinstance(value, int)
                or isinstance(value, bool)
                or not 0 <= value <= MAX_HISTORY_LIMIT
            ):
                raise ScheduleError(
                    f"{what} must be an integer from 0 to {MAX_HISTORY_LIMIT}, not {value!r}"
                )
        if not isinstance(self.strict_missed_limit, bool):
            raise ScheduleError("strict_missed_limit must be True or False")

    @cached_property
    def cron(self) -> str:
        """The normalised 5-field expression that is evaluated."""
        return normalize_expression(self.expression)

    @cached_property
    def zone(self) -> zoneinfo.ZoneInfo:
        return load_zone(self.timezone)

    @cached_property
    def ticks(self) -> Ticks:
        return Ticks(self.cron, self.zone, self.dst)

    def local(self, instant: datetime) -> str:
        """`instant` as RFC 3339 in the schedule's zone, e.g. 2025-03-09T03:00:00-04:00."""
        return instant.astimezone(self.zone).isoformat(timespec="seconds")

    def warn_if_unusual(self, stacklevel: int = 2) -> None:
        """Warn (not fail) about valid settings that are probably mistakes."""
        if self.starting_deadline is not None and self.starting_deadline < SHORT_DEADLINE:
            warnings.warn(
                ScheduleWarning(
                    f"schedule {self.name!r}: starting_deadline={self.starting_deadline:g}s is "
                    f"under {SHORT_DEADLINE:g}s; a tick that finds the scheduler busy or "
                    "changing leaders will be skipped as missed"
                ),
                stacklevel=stacklevel + 1,
            )
