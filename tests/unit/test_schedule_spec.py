"""Schedule declarations: cron syntax (5 fields, macros, names, steps, `?`), time zones and
the CronJob policy are validated once, with messages that say what to fix (SEMANTICS §1.2,
§1.10 row 13)."""

from __future__ import annotations

import warnings

import pytest

import rota
from rota.schedules import ConcurrencyPolicy, DstPolicy, ScheduleSpec, normalize_expression
from rota.schedules.spec import ScheduleWarning, check_run_name


@pytest.mark.parametrize(
    ("expression", "cron"),
    [
        ("*/5 * * * *", "*/5 * * * *"),
        ("0 3 * * *", "0 3 * * *"),
        ("@yearly", "0 0 1 1 *"),
        ("@annually", "0 0 1 1 *"),
        ("@monthly", "0 0 1 * *"),
        ("@weekly", "0 0 * * 0"),
        ("@daily", "0 0 * * *"),
        ("@midnight", "0 0 * * *"),
        ("@hourly", "0 * * * *"),
        ("@Daily", "0 0 * * *"),
        ("  15 10 * * mon-fri  ", "15 10 * * MON-FRI"),
        ("0 0 1 jan,jul *", "0 0 1 JAN,JUL *"),
        ("0 0 ? * MON", "0 0 * * MON"),
        ("0 0 1 * ?", "0 0 1 * *"),
        ("30 6-16/4 * * 1-5", "30 6-16/4 * * 1-5"),
        ("5/15 * * * *", "5-59/15 * * * *"),
        # Kubernetes (robfig) treats `*/2` as a restriction: day-of-month OR day-of-week.
        ("0 0 */2 * MON", "0 0 1-31/2 * MON"),
        ("0 0 * * */2", "0 0 * * 0-6/2"),
        # ...but `*/1` and a list containing `*` keep the star: AND.
        ("0 0 */1 * MON", "0 0 * * MON"),
        ("0 0 1,* * MON", "0 0 * * MON"),
    ],
)
def test_expressions_normalise(expression: str, cron: str) -> None:
    assert normalize_expression(expression) == cron


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        # §1.10 row 13
        ("61 * * * *", "bad minute field '61' (allowed: 0-59"),
        ("* * * *", "has 4 field(s); a cron expression has 5"),
        ("0 0 30 2 *", "never fires: day 30 does not occur in month(s) 2"),
        ("TZ=UTC * * * * *", "TZ= and CRON_TZ= prefixes are not supported"),
        # more
        ("59 23 31 2 *", "never fires: day 31 does not occur in month(s) 2"),
        ("0 0 31 4,6,9,11 *", "never fires"),
        ("CRON_TZ=Europe/Berlin 0 3 * * *", "tz='Europe/Berlin'"),
        ("* * * * * *", "seconds are not supported"),
        ("", "empty"),
        ("   ", "empty"),
        ("@every 5m", "@every is not supported"),
        ("@reboot", "unknown macro '@reboot'"),
        ("0 24 * * *", "bad hour field '24'"),
        ("0 0 0 * *", "bad day-of-month field '0'"),
        ("0 0 * 13 *", "bad month field '13'"),
        ("0 0 * * 8", "bad day-of-week field '8'"),
        ("0 0 * * mon#2", "not standard cron"),
        ("0 0 L * *", "not standard cron"),
        ("0 0 * * 5L", "not standard cron"),
        ("*/0 * * * *", "bad minute field '*/0'"),
        ("5-1 * * * *", "bad minute field '5-1'"),
        ("0 ? * * *", "bad hour field '?'"),
        ("a b c d e", "bad minute field 'a'"),
    ],
)
def test_bad_expressions_are_refused_with_the_reason(expression: str, message: str) -> None:
    with pytest.raises(rota.ScheduleError) as caught:
        normalize_expression(expression)
    assert message in str(caught.value)


def test_a_schedule_error_is_a_configuration_error() -> None:
    assert issubclass(rota.ScheduleError, rota.ConfigurationError)
    assert issubclass(rota.ScheduleNotFoundError, rota.RotaError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"timezone": "Mars/X"}, "unknown time zone 'Mars/X'"),  # §1.10 row 13
        ({"timezone": "Europe/Berln"}, "Did you mean 'Europe/Berlin'"),
        ({"timezone": ""}, "IANA time zone name"),
        ({"successful_history_limit": -1}, "successful_history_limit must be an integer"),
        ({"failed_history_limit": -1}, "failed_history_limit must be an integer"),
        ({"failed_history_limit": 1.5}, "failed_history_limit must be an integer"),
        ({"starting_deadline": 0}, "starting_deadline must be a positive number"),
        ({"starting_deadline": -5}, "starting_deadline must be a positive number"),
        ({"starting_deadline": float("inf")}, "starting_deadline must be a positive number"),
        ({"concurrency": "sometimes"}, "concurrency must be one of 'allow', 'forbid'"),
        ({"dst": "twice"}, "dst must be one of 'once', 'kubernetes'"),
        ({"strict_missed_limit": "yes"}, "strict_missed_limit must be True or False"),
        ({"name": "has space"}, "bad schedule name"),
        ({"name": ""}, "bad schedule name"),
    ],
)
def test_bad_policies_are_refused(kwargs: dict[str, object], message: str) -> None:
    values: dict[str, object] = {"name": "s", "expression": "* * * * *"}
    values.update(kwargs)
    with pytest.raises(rota.ScheduleError) as caught:
        ScheduleSpec(**values)  # type: ignore[arg-type]
    assert message in str(caught.value)


def test_policies_accept_kubernetes_spelling_and_defaults_match_kubernetes() -> None:
    spec = ScheduleSpec("s", "@hourly", concurrency="Forbid", dst="Kubernetes")  # type: ignore[arg-type]
    assert spec.concurrency is ConcurrencyPolicy.FORBID and spec.dst is DstPolicy.KUBERNETES
    default = ScheduleSpec("s", "* * * * *")
    assert default.timezone == "UTC"  # Kubernetes: the controller's zone; ours: UTC
    assert default.concurrency is ConcurrencyPolicy.ALLOW
    assert default.starting_deadline is None
    assert (default.successful_history_limit, default.failed_history_limit) == (3, 1)
    assert default.dst is DstPolicy.ONCE and default.strict_missed_limit is False


def test_a_short_deadline_warns_but_is_accepted() -> None:
    with pytest.warns(ScheduleWarning, match="under 10s"):
        ScheduleSpec("s", "* * * * *", starting_deadline=5).warn_if_unusual()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ScheduleSpec("s", "* * * * *", starting_deadline=10).warn_if_unusual()


def test_run_names() -> None:
    assert check_run_name("nightly", None).startswith("nightly-manual-")
    assert check_run_name("nightly", "rerun-1") == "rerun-1"
    with pytest.raises(rota.ScheduleError, match="form of a scheduled run"):
        check_run_name("nightly", "nightly-29000000")
    with pytest.raises(rota.ScheduleError, match="bad run name"):
        check_run_name("nightly", "a b")


def test_local_time_is_rfc3339_in_the_zone() -> None:
    from datetime import UTC, datetime

    spec = ScheduleSpec("s", "30 2 * * *", timezone="America/New_York")
    assert spec.local(datetime(2025, 3, 9, 7, 0, tzinfo=UTC)) == "2025-03-09T03:00:00-04:00"
