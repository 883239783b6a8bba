"""`rota workflows ls|show|cancel|retry-step`: inspect and steer workflow runs. A run is
named by its id, or by its key (`--key` when a key is all digits)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.cli.table import Column, Listing, json_text, say, wide_option
from rota.standard import App
from rota.workflows.spec import StepState, WorkflowState
from rota.workflows.status import StepStatus, WorkflowRun

_COLOURS = {
    "completed": "green",
    "failed": "red",
    "cancelled": "yellow",
    "skipped": "yellow",
    "running": "cyan",
}


def _ref(value: str, as_key: bool) -> int | str:
    return value if as_key or not value.isdigit() else int(value)


def _with_app(app_path: str | None, database_url: str | None, action: Any) -> Any:
    app = load_app(app_path, database_url)
    try:
        return run_guarded(lambda: action(app))
    finally:
        app.close()


def _when(value: datetime | None) -> str:
    return "-" if value is None else value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


def _state(value: str) -> tuple[str, str]:
    return (value, _COLOURS.get(value, ""))


def _progress(step: StepStatus) -> str:
    if step.total is None:
        return "-"
    done = step.counts.get("completed", 0)
    return f"{done}/{step.total}"


def _print_run(run: WorkflowRun, jobs: bool, wide: bool = False) -> None:
    say(
        (f"workflow {run.id}", "bold"),
        f" {run.name}  key={run.key}  ",
        _state(str(run.state)),
        f"  on_failure={run.on_failure}",
    )
    say(
        f"created {_when(run.created_at)} UTC  finished {_when(run.finished_at)}  "
        f"args: {json_text(run.args)}"
    )
    if run.error:
        say(("error:", "red"), f" {run.error}")
    table = Listing(
        Column("step", flex=True),
        "state",
        "jobs done",
        Column("after", flex=True, drop=2),
        Column("finished (UTC)", drop=1),
        Column("error", flex=True, least=24),
    )
    for step in run.steps:
        table.add_row(
            step.name,
            step.state,
            _progress(step),
            ", ".join(step.after) or "-",
            _when(step.finished_at),
            step.error or "",
        )
    table.print(wide=wide)
    if not jobs:
        return
    table = Listing(
        Column("step", flex=True),
        "index",
        Column("job", justify="right"),
        "state",
        "attempt",
        Column("error", flex=True, least=24),
    )
    for step in run.steps:
        for job in step.jobs:
            table.add_row(
                step.name,
                job.index,
                "-" if job.job_id is None else job.job_id,
                job.state,
                job.attempt,
                job.error or "",
            )
    table.print(wide=wide)


@click.group()
def workflows() -> None:
    """Inspect and steer workflow runs (DAGs of steps)."""


@workflows.command("ls")
@app_options
@click.option(
    "--state", type=click.Choice([s.value for s in WorkflowState]), help="Only runs in this state."
)
@click.option("--name", help="Only runs of this workflow.")
@click.option(
    "--limit", type=click.IntRange(1, 10_000), default=50, show_default=True, help="Most rows."
)
@json_option
def ls(
    app_path: str | None,
    database_url: str | None,
    state: str | None,
    name: str | None,
    limit: int,
    as_json: bool,
) -> None:
    """Workflow runs, newest first, with how far each step got."""
    runs: list[WorkflowRun] = _with_app(
        app_path,
        database_url,
        lambda app: app.workflows.all(state=state, name=name, limit=limit),
    )
    if as_json:
        print_json([r.to_json(jobs=False) for r in runs])
        return
    table = Listing(
        Column("id", justify="right"),
        Column("workflow", flex=True),
        Column("key", flex=True),
        "state",
        "steps",
        Column("created (UTC)", drop=2),
        Column("finished (UTC)", drop=1),
    )
    for run in runs:
        done = sum(1 for s in run.steps if s.state is StepState.COMPLETED)
        table.add_row(
            run.id,
            run.name,
            run.key or "-",
            run.state,
            f"{done}/{len(run.steps)}",
            _when(run.created_at),
            _when(run.finished_at),
        )
    table.print()


@workflows.command()
@app_options
@click.argument("ref")
@click.option("--key", "as_key", is_flag=True, help="REF is a key even if it is all digits.")
@click.option("--jobs/--no-jobs", default=True, show_default=True, help="List each step's jobs.")
@wide_option
@json_option
def show(
    app_path: str | None,
    database_url: str | None,
    ref: str,
    as_key: bool,
    jobs: bool,
    wide: bool,
    as_json: bool,
) -> None:
    """One run step by step: states, job ids, results and errors."""
    run: WorkflowRun = _with_app(
        app_path, database_url, lambda app: app.workflows.get(_ref(ref, as_key))
    )
    if as_json:
        print_json(run.to_json(jobs=jobs))
        return
    _print_run(run, jobs, wide)


@workflows.command()
@app_options
@click.argument("ref")
@click.option("--key", "as_key", is_flag=True, help="REF is a key even if it is all digits.")
@json_option
def cancel(
    app_path: str | None, database_url: str | None, ref: str, as_key: bool, as_json: bool
) -> None:
    """Cancel a running workflow: waiting step jobs are cancelled, running ones asked to stop."""

    def act(app: App) -> WorkflowRun:
        return app.workflows.cancel(_ref(ref, as_key))

    run: WorkflowRun = _with_app(app_path, database_url, act)
    if as_json:
        print_json(run.to_json(jobs=False))
        return
    say(f"workflow {run.id} cancelled")


@workflows.command("retry-step")
@app_options
@click.argument("ref")
@click.argument("step")
@click.option("--key", "as_key", is_flag=True, help="REF is a key even if it is all digits.")
@json_option
def retry_step(
    app_path: str | None,
    database_url: str | None,
    ref: str,
    step: str,
    as_key: bool,
    as_json: bool,
) -> None:
    """Run a failed STEP's failed jobs again; what the failure cancelled runs again too."""

    def act(app: App) -> WorkflowRun:
        return app.workflows.retry_step(_ref(ref, as_key), step)

    run: WorkflowRun = _with_app(app_path, database_url, act)
    if as_json:
        print_json(run.to_json(jobs=False))
        return
    retried = run.step(step)
    say(
        f"workflow {run.id}: step {step} is {retried.state} again "
        f"({_progress(retried)} jobs done); the workflow is {run.state}"
    )
