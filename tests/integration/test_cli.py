"""The `rota` CLI in-process (click's CliRunner) on both dialects: what each command prints
(text and --json) and does, and bad input refused with a clear message and a non-zero exit."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import rota
import rota.testing
from rota import JobState
from rota.cli.main import cli
from rota.worker.fetcher import claim_now
from tests.e2e.apps.e2e_tasks import register

APPS = Path(__file__).parents[1] / "e2e" / "apps"
APP = "e2e_app:app"  # registers the same tasks as `register()`

Invoke = Callable[..., Result]


@pytest.fixture
def run(database_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Invoke]:
    """`run("jobs", "ls", ...)` runs the CLI against this test's database. Exceptions are
    not caught: a traceback is a failure, a user should see a message instead."""
    monkeypatch.syspath_prepend(str(APPS))
    runner = CliRunner()
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level

    def invoke(*args: str, env: dict[str, str | None] | None = None) -> Result:
        full_env: dict[str, str | None] = {"ROTA_DATABASE_URL": database_url, "ROTA_APP": None}
        full_env.update(env or {})
        return runner.invoke(cli, list(args), env=full_env, catch_exceptions=False)

    yield invoke
    root.handlers[:], root.level = handlers, level  # `rota worker` configures logging


@pytest.fixture
def tasks_app(app: rota.App) -> rota.App:
    """The migrated test database, with the CLI app's tasks registered for inspection."""
    register(app)
    return app


def as_json(result: Result) -> Any:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def enqueue_json(run: Invoke, *args: str) -> dict[str, Any]:
    value: dict[str, Any] = as_json(run("enqueue", "--app", APP, *args, "--json"))
    return value


# --- enqueue and inspect -----------------------------------------------------------------


def test_enqueue_json_then_show_and_ls(run: Invoke, tasks_app: rota.App) -> None:
    job = enqueue_json(run, "greet", "--arg", "name=Ada", "--arg", "times=2")
    assert job["task"] == "greet"
    assert job["queue"] == "mail"  # the task's queue
    assert job["args"] == {"name": "Ada", "times": 2}  # times=2 is JSON, so an int
    assert job["state"] == "available"
    assert job["attempt"] == 0 and job["max_attempts"] == 2
    assert job["history"] == []

    stored = tasks_app.get_job(job["id"])
    assert stored is not None and stored.args == {"name": "Ada", "times": 2}

    shown = as_json(run("jobs", "show", str(job["id"]), "--json"))
    assert shown == job

    other = enqueue_json(run, "nap", "--args", json.dumps({"box": "/tmp", "seconds": 0.5}))
    listed = as_json(run("jobs", "ls", "--json"))
    assert [j["id"] for j in listed] == [other["id"], job["id"]]  # newest first
    assert [j["id"] for j in as_json(run("jobs", "ls", "--queue", "mail", "--json"))] == [job["id"]]
    assert [j["id"] for j in as_json(run("jobs", "ls", "--task", "nap", "--json"))] == [other["id"]]
    assert as_json(run("jobs", "ls", "--state", "completed", "--json")) == []
    assert len(as_json(run("jobs", "ls", "--limit", "1", "--json"))) == 1
    older = as_json(run("jobs", "ls", "--before-id", str(other["id"]), "--json"))
    assert [j["id"] for j in older] == [job["id"]]


def test_enqueue_text_output_and_the_human_views(run: Invoke, tasks_app: rota.App) -> None:
    result = run("enqueue", "--app", APP, "greet", "--arg", "name=Ada")
    assert result.exit_code == 0, result.output
    job_id = tasks_app.list_jobs()[0].id
    assert result.stdout.strip() == f"enqueued job {job_id} (greet on mail, available)"

    table = run("jobs", "ls")
    assert table.exit_code == 0, table.output
    assert "greet" in table.stdout and "available" in table.stdout

    shown = run("jobs", "show", str(job_id))
    assert shown.exit_code == 0, shown.output
    assert f"job {job_id}" in shown.stdout
    assert "state=available" in shown.stdout
    assert 'args: {"name": "Ada", "times": 1}' in shown.stdout  # JSON, not a Python dict

    queues = run("queues", "ls")
    assert queues.exit_code == 0, queues.output
    assert "mail" in queues.stdout


def test_stored_values_and_error_messages_are_printed_verbatim(
    run: Invoke, tasks_app: rota.App
) -> None:
    """Brackets in user data are text, not terminal markup to interpret."""
    job = enqueue_json(run, "greet", "--arg", "name=[bold]Ada[/bold] [1]")
    shown = run("jobs", "show", str(job["id"]))
    assert shown.exit_code == 0, shown.output
    assert '"name": "[bold]Ada[/bold] [1]"' in shown.stdout

    unknown = run("enqueue", "--app", APP, "[red]nope")
    assert unknown.exit_code == 1
    assert "unknown task '[red]nope'" in error_text(unknown)


def test_enqueue_options(run: Invoke, tasks_app: rota.App) -> None:
    args = ["greet", "--arg", "name=Ada"]
    scheduled = enqueue_json(run, *args, "--delay", "3600")
    assert scheduled["state"] == "scheduled"
    run_at = datetime.fromisoformat(scheduled["run_at"])
    created_at = datetime.fromisoformat(scheduled["created_at"])
    assert timedelta(seconds=3599) < run_at - created_at < timedelta(seconds=3601)

    at = datetime(2099, 1, 2, 3, 4, 5, tzinfo=UTC)
    later = enqueue_json(run, *args, "--at", "2099-01-02T04:04:05+01:00")
    assert later["state"] == "scheduled"
    assert datetime.fromisoformat(later["run_at"]) == at

    custom = enqueue_json(run, *args, "--queue", "vip", "--priority", "-5", "--max-attempts", "7")
    assert (custom["queue"], custom["priority"], custom["max_attempts"]) == ("vip", -5, 7)
    assert custom["state"] == "available"


def test_enqueue_with_a_key_is_idempotent(run: Invoke, tasks_app: rota.App) -> None:
    first = enqueue_json(run, "greet", "--arg", "name=Ada", "--key", "order-7")
    again = run("enqueue", "--app", APP, "greet", "--arg", "name=Ada", "--key", "order-7")
    assert again.exit_code == 0, again.output
    assert again.stdout.strip() == (
        f"already enqueued (same key) job {first['id']} (greet on mail, available)"
    )
    third = enqueue_json(run, "greet", "--arg", "name=Ada", "--key", "order-7")
    assert third["id"] == first["id"]
    assert len(tasks_app.list_jobs()) == 1


def test_database_url_option_reaches_an_app_that_reads_the_environment(
    run: Invoke, tasks_app: rota.App, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app module does `rota.App()` at import; `--database-url` alone must be enough."""
    monkeypatch.delitem(sys.modules, "e2e_app", raising=False)  # import it afresh
    result = run(
        "enqueue",
        "--app",
        APP,
        "--database-url",
        database_url,
        "greet",
        "--arg",
        "name=Ada",
        env={"ROTA_DATABASE_URL": None},
    )
    assert result.exit_code == 0, result.output
    assert [j.task for j in tasks_app.list_jobs()] == ["greet"]


# --- act on jobs ---------------------------------------------------------------------------


def test_cancel_then_retry(run: Invoke, tasks_app: rota.App) -> None:
    job = enqueue_json(run, "greet", "--arg", "name=Ada")

    cancelled = as_json(run("jobs", "cancel", str(job["id"]), "--json"))
    assert cancelled["state"] == "cancelled"
    assert cancelled["finished_at"] is not None
    assert tasks_app.get_job(job["id"]).state is JobState.CANCELLED  # type: ignore[union-attr]

    retried = as_json(run("jobs", "retry", str(job["id"]), "--json"))
    assert retried["state"] == "available"
    assert retried["finished_at"] is None
    assert tasks_app.get_job(job["id"]).state is JobState.AVAILABLE  # type: ignore[union-attr]

    text = run("jobs", "cancel", str(job["id"]))
    assert text.exit_code == 0, text.output
    assert text.stdout.strip() == f"job {job['id']} cancelled"


def test_retry_a_completed_job_runs_it_again(run: Invoke, tasks_app: rota.App) -> None:
    job = enqueue_json(run, "greet", "--arg", "name=Ada")
    rota.testing.drain(tasks_app, ["mail"])
    done = as_json(run("jobs", "show", str(job["id"]), "--json"))
    assert done["state"] == "completed"
    assert done["result"] == "hello Ada"
    assert [a["outcome"] for a in done["history"]] == ["completed"]

    text = run("jobs", "retry", str(job["id"]))
    assert text.exit_code == 0, text.output
    assert text.stdout.strip() == f"job {job['id']} is available again"
    again = tasks_app.get_job(job["id"])
    assert again is not None and again.state is JobState.AVAILABLE
    # The job has an attempt left to run again with.
    assert again.max_attempts > again.attempt


def test_cancel_a_running_job_asks_it_to_stop(run: Invoke, tasks_app: rota.App) -> None:
    job = enqueue_json(run, "greet", "--arg", "name=Ada")
    (claimed,) = claim_now(tasks_app, "mail", 1, "worker-1", 30.0)
    assert claimed.id == job["id"]

    result = run("jobs", "cancel", str(job["id"]))
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == f"job {job['id']} is running: asked it to stop"
    running = as_json(run("jobs", "show", str(job["id"]), "--json"))
    assert running["state"] == "running"
    assert running["cancel_requested"] is True


# --- queues --------------------------------------------------------------------------------


def test_queues_ls_pause_resume(run: Invoke, tasks_app: rota.App) -> None:
    # Due an hour ago on the database clock: the oldest job's age is known.
    inserted = tasks_app.driver.db_now()
    due = (inserted - timedelta(hours=1)).isoformat()
    enqueue_json(run, "greet", "--arg", "name=Ada", "--at", due)
    enqueue_json(run, "greet", "--arg", "name=Bob")
    enqueue_json(run, "nap", "--args", json.dumps({"box": "/tmp", "seconds": 0}))

    def queue(name: str) -> dict[str, Any]:
        reports = as_json(run("queues", "ls", "--json"))
        (found,) = [r for r in reports if r["name"] == name]
        return found  # type: ignore[no-any-return]

    mail = queue("mail")
    since = (tasks_app.driver.db_now() - inserted).total_seconds()
    assert mail["paused"] is False
    assert mail["counts"].get("available") == 2
    assert 3600 <= mail["oldest_available_age_s"] <= 3600 + since + 0.01
    assert queue("default")["counts"].get("available") == 1

    assert as_json(run("queues", "pause", "mail", "--json")) == {"name": "mail", "paused": True}
    assert queue("mail")["paused"] is True
    # A paused queue hands out nothing; other queues are unaffected.
    assert claim_now(tasks_app, "mail", 10, "w", 30.0) == []
    assert len(claim_now(tasks_app, "default", 10, "w", 30.0)) == 1

    text = run("queues", "resume", "mail")
    assert text.exit_code == 0, text.output
    assert text.stdout.strip() == "queue mail resumed"
    assert queue("mail")["paused"] is False
    assert len(claim_now(tasks_app, "mail", 10, "w", 30.0)) == 2

    assert as_json(run("queues", "resume", "mail", "--json")) == {
        "name": "mail",
        "paused": False,
    }


# --- bad input -----------------------------------------------------------------------------


def error_text(result: Result) -> str:
    """What the user reads on stderr, on one line."""
    return " ".join(result.stderr.split())


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        pytest.param(
            ["nope", "--arg", "x=1"],
            1,
            "unknown task 'nope'. Known tasks: frozen, gc_threshold, greet, hang, hold, "
            "hold_async, nap",
            id="unknown-task",
        ),
        pytest.param(
            ["greet", "--args", "{name: Ada}"], 2, "Invalid value for --args: not JSON", id="args"
        ),
        pytest.param(
            ["greet", "--args", '["Ada"]'], 2, "--args: must be a JSON object", id="args-list"
        ),
        pytest.param(
            ["greet", "--arg", "name=Ada", "--arg", "times=many"],
            1,
            "bad arguments for task greet: times: Input should be a valid integer",
            id="type-mismatch",
        ),
        pytest.param(
            ["greet", "--arg", "times=2"],
            1,
            "bad arguments for task greet: missing argument 'name'",
            id="missing-argument",
        ),
        pytest.param(
            ["greet", "--arg", "name=Ada", "--arg", "colour=red"],
            1,
            "unexpected argument 'colour' (the task takes: name, times)",
            id="unexpected-argument",
        ),
        pytest.param(["greet", "--arg", "nameAda"], 2, "'nameAda': use name=value", id="arg-form"),
        pytest.param(
            ["greet", "--arg", "name=Ada", "--at", "2099-01-01T00:00:00"],
            1,
            "--at needs a UTC offset",
            id="naive-at",
        ),
        pytest.param(
            ["greet", "--arg", "name=Ada", "--at", "tomorrow"],
            2,
            "'tomorrow' is not ISO 8601",
            id="bad-at",
        ),
        pytest.param(
            ["greet", "--arg", "name=Ada", "--priority", "1000"],
            1,
            "priority must be an integer from -100 to 100",
            id="priority",
        ),
        pytest.param(
            ["greet", "--arg", "name=Ada", "--queue", "a,b"],
            1,
            "bad queue name 'a,b'",
            id="queue-name",
        ),
        pytest.param(
            ["greet", "--arg", "name=Ada", "--max-attempts", "0"],
            1,
            "max_attempts must be an integer from 1 to 10000",
            id="max-attempts",
        ),
    ],
)
def test_enqueue_refuses_bad_input(
    run: Invoke, tasks_app: rota.App, args: list[str], code: int, message: str
) -> None:
    result = run("enqueue", "--app", APP, *args)
    assert result.exit_code == code
    assert message in error_text(result)
    assert "Traceback" not in result.output
    assert tasks_app.list_jobs() == []  # nothing was written


def test_enqueue_needs_an_app(run: Invoke, tasks_app: rota.App) -> None:
    result = run("enqueue", "greet", "--arg", "name=Ada")
    assert result.exit_code == 2
    assert "enqueue needs --app" in error_text(result)
    assert tasks_app.list_jobs() == []


@pytest.mark.parametrize(
    ("app_path", "message"),
    [
        ("e2e_app", "'e2e_app': use the form package.module:attribute"),
        ("no_such_module:app", "cannot import 'no_such_module'"),
        ("e2e_app:missing", "e2e_app:missing is NoneType, not a rota.App"),
        ("e2e_app:register", "not a rota.App"),
    ],
)
def test_a_bad_app_path_is_refused(
    run: Invoke, tasks_app: rota.App, app_path: str, message: str
) -> None:
    result = run("enqueue", "--app", app_path, "greet", "--arg", "name=Ada")
    assert result.exit_code == 2
    assert message in error_text(result)


@pytest.mark.parametrize(
    "command",
    [
        ["jobs", "ls"],
        ["queues", "ls"],
        ["migrate", "--check"],
        ["enqueue", "--app", APP, "greet", "--arg", "name=Ada"],
    ],
    ids=lambda c: "-".join(c[:2]),
)
@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://db/rota", "unsupported database URL 'mysql://db/rota'"),
        ("sqlite:///", "bad SQLite URL"),
        ("postgresql://localhost:/rota", "the port in 'localhost:' is empty"),
    ],
)
def test_a_bad_database_url_is_refused(
    run: Invoke, command: list[str], url: str, message: str
) -> None:
    result = run(*command, "--database-url", url)
    assert result.exit_code == 2, result.output
    assert message in error_text(result)
    assert "--database-url" in error_text(result)


def test_no_database_url_at_all_is_explained(run: Invoke) -> None:
    result = run("jobs", "ls", env={"ROTA_DATABASE_URL": None})
    assert result.exit_code == 2
    assert "no database URL" in error_text(result)
    assert "ROTA_DATABASE_URL" in error_text(result)


@pytest.mark.parametrize("action", ["show", "retry", "cancel"])
def test_a_nonexistent_job_id_is_an_error(run: Invoke, tasks_app: rota.App, action: str) -> None:
    result = run("jobs", action, "424242")
    assert result.exit_code == 1
    assert "no job with id 424242" in error_text(result)
    json_result = run("jobs", action, "424242", "--json")
    assert json_result.exit_code == 1
    assert json_result.stdout == ""


def test_a_job_id_must_be_a_number(run: Invoke, tasks_app: rota.App) -> None:
    result = run("jobs", "show", "abc")
    assert result.exit_code == 2
    assert "'abc' is not a valid integer" in error_text(result)


def test_acting_on_a_job_in_the_wrong_state_says_why(run: Invoke, tasks_app: rota.App) -> None:
    job = enqueue_json(run, "greet", "--arg", "name=Ada")
    retry = run("jobs", "retry", str(job["id"]))
    assert retry.exit_code == 1
    assert f"job {job['id']} is available: it cannot be retried" in error_text(retry)

    as_json(run("jobs", "cancel", str(job["id"]), "--json"))
    again = run("jobs", "cancel", str(job["id"]))
    assert again.exit_code == 1
    assert f"job {job['id']} is cancelled: it cannot be cancelled" in error_text(again)


def test_bad_list_filters_are_refused(run: Invoke, tasks_app: rota.App) -> None:
    state = run("jobs", "ls", "--state", "done")
    assert state.exit_code == 2
    assert "'done' is not one of" in error_text(state)
    limit = run("jobs", "ls", "--limit", "0")
    assert limit.exit_code == 2


def test_a_bad_queue_name_is_refused(run: Invoke, tasks_app: rota.App) -> None:
    result = run("queues", "pause", "a,b")
    assert result.exit_code == 1
    assert "bad queue name 'a,b'" in error_text(result)
    assert all(not q.paused for q in tasks_app.list_queues())


def test_migrate_check_json_on_an_empty_database(run: Invoke, database_url: str) -> None:
    with rota.App(database_url) as app:
        latest = app.driver.latest_schema_version
    result = run("migrate", "--check", "--json")
    assert result.exit_code == 1
    status = json.loads(result.stdout)
    assert (status["version"], status["expected"], status["current"]) == (0, latest, False)


def test_migrate_wait_needs_check(run: Invoke) -> None:
    result = run("migrate", "--wait")
    assert result.exit_code == 2
    assert "--wait goes with --check" in error_text(result)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ([], "worker needs --app"),
        (["--app", APP, "--queues", "mail=many"], "bad concurrency 'many' for queue 'mail'"),
        (["--app", APP, "--queues", "mail=0"], "concurrency of queue 'mail' must be 1-10000"),
        (["--app", APP, "--queues", "mail,mail"], "queue 'mail' is listed twice"),
        (["--app", APP, "--lease", "1", "--heartbeat", "2"], "must be shorter than the lease"),
        (["--app", APP, "--gc-threshold", "-1"], "-1 is not in the range 0<=x<=1000000"),
    ],
)
def test_worker_refuses_bad_options_before_starting(
    run: Invoke, tasks_app: rota.App, options: list[str], message: str
) -> None:
    result = run("worker", *options)
    assert result.exit_code == 2
    assert message in error_text(result)


def child_argv(run: Invoke, monkeypatch: pytest.MonkeyPatch, *given: str) -> list[str]:
    """The command line `rota worker --processes 2 ...given` starts its children with (the
    supervisor replaced by one that records it)."""
    import rota.cli.worker

    children: list[list[str]] = []
    monkeypatch.setattr(
        rota.cli.worker, "supervise", lambda argv, processes: children.append(argv) or 0
    )
    result = run("worker", "--app", APP, "--processes", "2", *given)
    assert result.exit_code == 0, result.output
    (argv,) = children
    return argv


@pytest.mark.parametrize(("given", "passed"), [([], "10000"), (["--gc-threshold", "0"], "0")])
def test_worker_processes_pass_the_gc_threshold_on_to_their_children(
    run: Invoke, monkeypatch: pytest.MonkeyPatch, given: list[str], passed: str
) -> None:
    argv = child_argv(run, monkeypatch, *given)
    assert argv[argv.index("--gc-threshold") + 1] == passed


def test_worker_processes_pass_each_deadline_given_on_to_their_children(
    run: Invoke, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = ["--db-detect-timeout", "3.0", "--lease-margin", "0.5", "--db-statement-timeout", "0"]
    argv = child_argv(run, monkeypatch, *given)
    passed = argv[argv.index("--exit-when-hung") + 1 :]
    # In the table's order; those not given are left to each child's default.
    assert passed == [
        "--lease-margin", "0.5", "--db-statement-timeout", "0.0", "--db-detect-timeout", "3.0"
    ]  # fmt: skip
