"""Processing windows and circuit breakers on both dialects: the hold service's passes
under a clock the test moves (windows), and real in-process workers against a downstream
the test kills and revives (breakers)."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta

import pytest
from click.testing import CliRunner, Result

import rota
from rota.cli.main import cli
from rota.observe.cluster import cluster_registry
from rota.ops.service import QueueHoldService
from rota.telemetry.logging import JsonFormatter
from rota.telemetry.prometheus import render_text
from tests.helpers import claims_tried, fast_settings, run_worker_until, wait_for

Invoke = Callable[..., Result]

BERLIN_NOON = datetime(2026, 6, 1, 10, 0, tzinfo=UTC)  # 12:00 in Berlin (CEST)
BERLIN_TWO = datetime(2026, 6, 2, 0, 0, tzinfo=UTC)  # 02:00 in Berlin


def paused(app: rota.App, queue: str) -> bool:
    return any(q.paused for q in app.list_queues() if q.name == queue)


def sources(app: rota.App, queue: str) -> set[str]:
    return {h.source for h in app.queues.holds(queue)}


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_window_closes_and_opens_the_queue(app: rota.App) -> None:
    clock = Clock(BERLIN_NOON)
    service = QueueHoldService(app.driver, 1.0, clock=clock)
    schedule = app.queues.set_window("reports", "01:00-05:00", tz="Europe/Berlin")
    assert str(schedule.windows[0]) == "01:00-05:00"
    report = service.run_once()
    assert paused(app, "reports") and sources(app, "reports") == {"window"}
    hold = app.queues.holds("reports")[0]
    assert hold.until == datetime(2026, 6, 1, 23, 0, tzinfo=UTC)  # 01:00 Berlin
    assert "01:00-05:00 Europe/Berlin" in hold.reason
    assert service.run_once().windows_closed == 0  # already held: nothing to do
    clock.now = BERLIN_TWO
    report = service.run_once()
    assert report.windows_opened == 1
    assert not paused(app, "reports") and sources(app, "reports") == set()
    clock.now = BERLIN_NOON.replace(day=2)
    assert service.run_once().windows_closed == 1 and paused(app, "reports")
    assert app.queues.clear_window("reports")
    assert not paused(app, "reports") and app.queues.window("reports") is None
    assert not app.queues.clear_window("reports")


def test_an_operators_pause_outlives_the_window_and_vice_versa(app: rota.App) -> None:
    clock = Clock(BERLIN_NOON)
    service = QueueHoldService(app.driver, 1.0, clock=clock)
    app.queues.set_window("reports", ["01:00-05:00"], tz="Europe/Berlin")
    service.run_once()
    app.pause_queue("reports")  # the operator pauses while the window holds it
    clock.now = BERLIN_TWO
    service.run_once()  # the window opens ...
    assert paused(app, "reports") and sources(app, "reports") == {"manual"}  # ... still paused
    app.resume_queue("reports")
    assert not paused(app, "reports")
    # The other way round: resuming while the window is closed lifts only the manual hold.
    app.pause_queue("reports")
    clock.now = BERLIN_NOON.replace(day=2)
    service.run_once()
    app.resume_queue("reports")
    assert paused(app, "reports") and sources(app, "reports") == {"window"}


def test_a_pause_from_before_holds_is_kept_as_the_operators(app: rota.App) -> None:
    app.driver.queue_set_paused("old", True)  # paused by an older rota: no hold row
    clock = Clock(BERLIN_TWO)
    service = QueueHoldService(app.driver, 1.0, clock=clock)
    app.queues.set_window("old", "01:00-05:00", tz="Europe/Berlin")  # open now
    clock.now = BERLIN_NOON
    service.run_once()
    assert sources(app, "old") == {"manual", "window"}
    clock.now = BERLIN_TWO
    service.run_once()
    assert paused(app, "old") and sources(app, "old") == {"manual"}


def test_bad_windows_and_breakers_are_refused_before_anything_is_written(app: rota.App) -> None:
    for windows, tz, text in [
        ("25:00-05:00", "UTC", "bad time"),
        ("01:00-01:00", "UTC", "no length"),
        ("1am-5am", "UTC", "HH:MM"),
        ("Funday 01:00-02:00", "UTC", "bad day"),
        ([], "UTC", "at least one"),
        ("01:00-05:00", "Europe/Berlinn", "unknown time zone"),
        ("01:00-05:60", "UTC", "bad time"),
    ]:
        with pytest.raises(rota.RotaError, match=text):
            app.queues.set_window("q", windows, tz=tz)
    for kwargs, text in [
        ({"threshold": 0}, "threshold"),
        ({"threshold": 1.5}, "threshold"),
        ({"min_attempts": 0}, "min_attempts"),
        ({"window": 0.1}, "window"),
        ({"cooldown": float("nan")}, "cooldown"),
        ({"cooldown": True}, "cooldown"),
    ]:
        with pytest.raises(rota.RotaError, match=text):
            app.queues.set_breaker("q", **kwargs)  # type: ignore[arg-type]
    with pytest.raises(rota.RotaError, match="no circuit breaker"):
        app.queues.reset_breaker("q")
    assert app.queues.window("q") is None and app.queues.breaker("q") is None
    assert app.queues.holds() == []


def test_a_worker_starts_nothing_while_the_window_is_closed(app: rota.App) -> None:
    asyncio.run(_a_worker_starts_nothing_while_the_window_is_closed(app))


async def _a_worker_starts_nothing_while_the_window_is_closed(app: rota.App) -> None:
    ran: list[int] = []

    @app.task(queue="reports")
    def report(n: int) -> None:
        ran.append(n)

    app.queues.set_window("reports", "01:00-05:00", tz="Europe/Berlin")
    worker = rota.Worker(app, fast_settings(queues={"reports": 4}, hold_interval=0.05))
    service = next(s for s in worker.services if isinstance(s, QueueHoldService))
    clock = Clock(BERLIN_NOON)
    service.clock = clock
    task = asyncio.create_task(worker.run())
    try:
        await asyncio.to_thread(wait_for, lambda: worker.elector.is_leader and service.runs > 0)
        for n in range(5):
            report.enqueue(n=n)
        await claims_tried(worker, "reports")  # the worker looked: the closed window held
        assert ran == [] and paused(app, "reports")
        # The operator pauses too; the window opening must not undo that.
        await asyncio.to_thread(app.pause_queue, "reports")
        clock.now = BERLIN_TWO
        await asyncio.to_thread(wait_for, lambda: sources(app, "reports") == {"manual"})
        await claims_tried(worker, "reports")
        assert ran == []
        await asyncio.to_thread(app.resume_queue, "reports")
        await asyncio.to_thread(wait_for, lambda: len(ran) == 5)
    finally:
        worker.stop()
        await asyncio.wait_for(task, timeout=30)


async def run_workers(
    workers: list[rota.Worker], condition: Callable[[], object], timeout: float
) -> None:
    """Run the workers on this loop until `condition()` holds, then stop them."""
    tasks = [asyncio.create_task(w.run()) for w in workers]
    try:
        await asyncio.to_thread(wait_for, condition, timeout)
    finally:
        for w in workers:
            w.stop()
        await asyncio.wait_for(asyncio.gather(*tasks), timeout=30)


class Downstream:
    """A service the tasks call: down raises, up answers; counts the calls."""

    def __init__(self) -> None:
        self.up = False
        self.calls = 0
        self.lock = threading.Lock()

    def call(self) -> None:
        with self.lock:
            self.calls += 1
        if not self.up:
            time.sleep(0.02)  # a dead service answers late, then not at all
            raise ConnectionError("downstream unavailable")


def breaker_app(app: rota.App, downstream: Downstream) -> rota.Task:  # type: ignore[type-arg]
    @app.task(queue="mail", max_attempts=5, backoff=rota.Backoff(base=0.05, cap=0.05))
    def send(n: int) -> None:
        downstream.call()

    return send


def test_breaker_opens_on_failures_and_a_trial_success_closes_it(
    app: rota.App, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rota.holds")
    asyncio.run(_breaker_opens_on_failures_and_a_trial_success_closes_it(app))
    events = [getattr(r, "event", None) for r in caplog.records if r.name == "rota.holds"]
    assert events == ["breaker_opened", "breaker_half_open", "breaker_closed"]
    opened = next(r for r in caplog.records if getattr(r, "event", None) == "breaker_opened")
    line = json.loads(JsonFormatter().format(opened))
    assert line["event"] == "breaker_opened" and line["queue"] == "mail"


async def _breaker_opens_on_failures_and_a_trial_success_closes_it(app: rota.App) -> None:
    downstream = Downstream()
    send = breaker_app(app, downstream)
    app.queues.set_breaker("mail", threshold=0.5, min_attempts=5, window=60, cooldown=1.0)
    for n in range(40):
        send.enqueue(n=n)
    worker = rota.Worker(app, fast_settings(queues={"mail": 2}, hold_interval=0.05))

    def opened() -> bool:
        breaker = app.queues.breaker("mail")
        return breaker is not None and breaker.state == "open"

    await run_worker_until(worker, opened)
    assert paused(app, "mail") and sources(app, "mail") == {"breaker"}
    text = render_text(cluster_registry(app.driver, cache_seconds=0))
    assert 'rota_queue_breaker_state{queue="mail",state="open"} 1.0' in text
    assert 'rota_queue_breaker_opened_total{queue="mail"} 1.0' in text
    assert 'rota_queue_held{queue="mail",source="breaker"} 1.0' in text
    spent = downstream.calls
    # Opening waits for the leader's next pass: a few more attempts, never all 200.
    assert 5 <= spent < 40
    downstream.up = True
    worker = rota.Worker(app, fast_settings(queues={"mail": 2}, hold_interval=0.05))

    def done() -> bool:
        return sum(j.state is rota.JobState.COMPLETED for j in app.list_jobs(queue="mail")) == 40

    await run_worker_until(worker, done, timeout=30)
    breaker = app.queues.breaker("mail")
    assert breaker is not None and breaker.state == "closed" and breaker.trips == 1
    assert not paused(app, "mail")
    control = app.queues.get("mail")
    assert control.rate_limit is None  # the trial's borrowed rate limit was given back


def test_a_failed_trial_reopens_the_breaker_after_exactly_one_job(app: rota.App) -> None:
    asyncio.run(_a_failed_trial_reopens_the_breaker_after_exactly_one_job(app))


async def _a_failed_trial_reopens_the_breaker_after_exactly_one_job(app: rota.App) -> None:
    downstream = Downstream()
    send = breaker_app(app, downstream)
    app.queues.configure("mail", rate=(1000, 60.0))  # the operator's own limit survives
    app.queues.set_breaker("mail", threshold=0.5, min_attempts=4, window=60, cooldown=1.0)
    for n in range(20):
        send.enqueue(n=n)
    # Two workers: the single trial holds over all of them, not per worker.
    workers = [
        rota.Worker(app, fast_settings(queues={"mail": 4}, hold_interval=0.05)) for _ in range(2)
    ]
    calls_at_open: list[int] = []

    def tripped_twice() -> bool:
        breaker = app.queues.breaker("mail")
        if breaker is None:
            return False
        # Sample once the jobs claimed before the hold have finished: they may still
        # call the downstream after the breaker opened, and are not trials.
        if (
            breaker.trips == 1
            and not calls_at_open
            and breaker.state == "open"
            and not app.list_jobs(queue="mail", state="running")
        ):
            calls_at_open.append(downstream.calls)
        return breaker.trips >= 2 and breaker.state == "open"

    await run_workers(workers, tripped_twice, timeout=30)
    breaker = app.queues.breaker("mail")
    assert breaker is not None
    assert breaker.trial_job_id is None and paused(app, "mail")
    # Between the first opening (once its running jobs ended) and the second only the
    # trial ran (the retries of those jobs cannot start: the queue is held).
    assert calls_at_open and downstream.calls - calls_at_open[0] <= 1
    assert app.queues.get("mail").rate_limit == 1000  # restored after the trial
    app.queues.reset_breaker("mail")
    assert not paused(app, "mail") and app.queues.breaker("mail").state == "closed"  # type: ignore[union-attr]


# --- CLI -----------------------------------------------------------------------------


@pytest.fixture
def run(database_url: str) -> Iterator[Invoke]:
    runner = CliRunner()

    def invoke(*args: str) -> Result:
        env: dict[str, str | None] = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None}
        return runner.invoke(cli, list(args), env=env, catch_exceptions=False)

    yield invoke


def test_cli_sets_shows_and_clears_windows_and_breakers(run: Invoke, app: rota.App) -> None:
    result = run(
        "queues", "window", "reports", "01:00-05:00", "Sat,Sun 10:00-12:00", "--tz", "Europe/Berlin"
    )
    assert result.exit_code == 0, result.output
    assert "01:00-05:00, Sat,Sun 10:00-12:00 Europe/Berlin" in result.output
    shown = json.loads(run("queues", "window", "reports", "--json").output)
    assert shown["windows"] == ["01:00-05:00", "Sat,Sun 10:00-12:00"]
    assert shown["tz"] == "Europe/Berlin"
    assert shown["closed"] == any(h.source == "window" for h in app.queues.holds("reports"))
    bad = run("queues", "window", "reports", "01:00-05:00", "--tz", "Mars/Olympus")
    assert bad.exit_code == 1 and "unknown time zone" in bad.output
    bad = run("queues", "window", "reports", "1-5")
    assert bad.exit_code == 1 and "HH:MM" in bad.output
    assert app.queues.window("reports") is not None  # the bad calls changed nothing
    assert "no processing windows" in run("queues", "window", "reports", "--clear").output
    assert app.queues.holds("reports") == []

    result = run("queues", "breaker", "mail", "--threshold", "0.3", "--cooldown", "2m")
    assert result.exit_code == 0, result.output
    assert "closed" in result.output
    shown = json.loads(run("queues", "breaker", "mail", "--json").output)
    assert shown["state"] == "closed" and shown["threshold"] == 0.3
    assert shown["cooldown_s"] == 120.0 and shown["min_attempts"] == 20
    run("queues", "breaker", "mail", "--min-attempts", "5")
    breaker = app.queues.breaker("mail")
    assert breaker is not None and (breaker.threshold, breaker.min_attempts) == (0.3, 5)
    bad = run("queues", "breaker", "mail", "--threshold", "2")
    assert bad.exit_code == 1 and "threshold" in bad.output
    bad = run("queues", "breaker", "mail", "--window", "soon")
    assert bad.exit_code == 2 and "--window" in bad.output
    assert json.loads(run("queues", "breaker", "--json").output)[0]["queue"] == "mail"
    run("queues", "pause", "mail")
    holds = json.loads(run("queues", "holds", "--json").output)
    assert [(h["queue"], h["source"]) for h in holds] == [("mail", "manual")]
    assert run("queues", "breaker", "mail", "--clear").exit_code == 0
    assert app.queues.breaker("mail") is None
    assert "no circuit breaker" in run("queues", "breaker", "mail").output


def test_cli_ls_and_resume_say_what_holds_a_queue(run: Invoke, app: rota.App) -> None:
    app.queues.set_breaker("mail", min_attempts=5)
    app.queues.set_window("mail", "00:00-24:00")  # always open
    app.pause_queue("mail")
    listed = {q["name"]: q for q in json.loads(run("queues", "ls", "--json").output)}
    assert listed["mail"]["held_by"] == ["manual"] and listed["mail"]["breaker"] == "closed"
    assert "bre" in run("queues", "ls").output  # a narrow terminal truncates the column
    app.queues.set_window("mail", "Mon 00:00-00:01")  # closed nearly always
    if app.queues.holds("mail")[-1].source == "window":
        result = run("queues", "resume", "mail")
        assert result.output.strip() == "queue mail resumed (still held by: window)"
        assert paused(app, "mail")


@pytest.mark.parametrize(
    ("night", "opens", "closes"),
    [
        # Spring: Berlin skips 02:00-03:00, the window is three hours long.
        (
            datetime(2026, 3, 28, 22, tzinfo=UTC),
            datetime(2026, 3, 29, 0, tzinfo=UTC),
            datetime(2026, 3, 29, 3, tzinfo=UTC),
        ),
        # Autumn: Berlin repeats 02:00-03:00, the window is five hours long.
        (
            datetime(2026, 10, 24, 22, tzinfo=UTC),
            datetime(2026, 10, 24, 23, tzinfo=UTC),
            datetime(2026, 10, 25, 4, tzinfo=UTC),
        ),
    ],
)
def test_the_service_follows_the_window_through_dst_nights(
    app: rota.App, night: datetime, opens: datetime, closes: datetime
) -> None:
    clock = Clock(night)
    service = QueueHoldService(app.driver, 1.0, clock=clock)
    app.queues.set_window("nightly", "01:00-05:00", tz="Europe/Berlin")
    open_at: list[datetime] = []
    for step in range(8 * 4):  # eight hours in quarter hours
        clock.now = night + timedelta(minutes=15 * step)
        service.run_once()
        if not paused(app, "nightly"):
            open_at.append(clock.now)
    assert open_at[0] == opens and open_at[-1] == closes - timedelta(minutes=15)
    assert len(open_at) == (closes - opens) / timedelta(minutes=15)
