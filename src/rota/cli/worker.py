"""`rota worker`: run a worker (or several processes of it) until SIGTERM."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import sys

import click

from rota.cli.common import F, app_options, database_url_file, fail, load_app
from rota.errors import ConfigurationError, SchemaError
from rota.ops.retention import parse_retention
from rota.settings import parse_queues
from rota.telemetry.logging import configure
from rota.worker import Worker, WorkerSettings
from rota.worker.supervisor import EXIT_SCHEMA, REQUESTS, supervise

# Deadlines that default to a share of --lease (WorkerSettings works each out when it is
# not given): (option, least value, help). Each is a click option, a WorkerSettings field
# of the same name, and under --processes an option passed on to every child.
_DEADLINES: tuple[tuple[str, float, str], ...] = (
    (
        "--lease-margin",
        0.01,
        "Seconds before a lease can run out that the worker stops its job when renewals "
        "fail (default: lease / 10).",
    ),
    (
        "--db-call-timeout",
        0.01,
        "Seconds a database call may wait for an answer before its connection is cut "
        "(default: lease / 3).",
    ),
    (
        "--db-statement-timeout",
        0,
        "PostgreSQL statement_timeout of rota's statements; 0: none "
        "(default: lease / 3, at least 5).",
    ),
    (
        "--db-connect-timeout",
        0.01,
        "Seconds to open a connection (default: lease / 3, at least 2).",
    ),
    (
        "--db-detect-timeout",
        0.01,
        "Seconds of silence after which a peer is dead: TCP keepalives and "
        "tcp_user_timeout (default: lease / 3).",
    ),
)


def _deadline_options(func: F) -> F:
    """The options of _DEADLINES, in the table's order; the command takes their values
    as `**deadlines` (click names each after its option: db_call_timeout)."""
    for flag, least, text in reversed(_DEADLINES):
        func = click.option(flag, type=click.FloatRange(min=least), help=text)(func)
    return func


# Python's first collection threshold in a worker process (its default is 700).
GC_THRESHOLD = 10_000


def tune_gc(threshold: int) -> None:
    """Set up the collector of a process that is the worker's alone.

    What start-up made (the app, the modules it imported) lives as long as the process:
    frozen, full collections need not walk it again. A draining worker holds the objects of
    hundreds of jobs in flight; at Python's threshold of 700 new objects its young
    collections walk and promote them again and again (about 4% of a SQLite drain's worker
    CPU, docs/benchmarks.md). Garbage in reference cycles is still collected, after
    `threshold` new objects instead of 700."""
    gc.collect()
    gc.freeze()
    if threshold:
        gc.set_threshold(threshold, *gc.get_threshold()[1:])


@click.command()
@app_options
@click.option(
    "--queues",
    "queue_spec",
    default="default=10",
    show_default=True,
    help="Queues and per-process concurrency: tickets=4,reports=1.",
)
@click.option(
    "--processes",
    type=click.IntRange(1, 256),
    default=1,
    show_default=True,
    help="Worker processes to run (for CPU-bound sync tasks).",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="On SIGTERM, seconds running jobs may take before they are returned.",
)
@click.option(
    "--lease",
    type=click.FloatRange(min=0.1),
    default=30.0,
    show_default=True,
    help="Seconds a job's lease lasts without a heartbeat.",
)
@click.option(
    "--heartbeat",
    type=click.FloatRange(min=0.01),
    help="Seconds between heartbeats (default: lease / 3).",
)
@click.option(
    "--poll-interval",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Fallback polling when no notification arrives.",
)
@click.option(
    "--fetch-batch",
    type=click.IntRange(1, 10_000),
    default=WorkerSettings.fetch_batch,
    show_default=True,
    help="Most jobs claimed in one statement (a claim takes at most the free slots).",
)
@click.option("--worker-id", help="Name of this worker in leases and attempt history.")
@click.option(
    "--capability",
    "capabilities",
    multiple=True,
    metavar="LABEL",
    help="A resource this worker has (e.g. gpu, mem:large); repeatable. It claims only "
    "jobs whose required labels it has.",
)
@click.option(
    "--rescue-interval",
    type=click.FloatRange(min=0.01),
    default=5.0,
    show_default=True,
    help="Leader: seconds between checks for expired leases.",
)
@click.option(
    "--stage-interval",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Leader: seconds between moves of due jobs to available.",
)
@click.option(
    "--cron-interval",
    type=click.FloatRange(min=0.01),
    default=1.0,
    show_default=True,
    help="Leader: seconds between passes over the cron schedules.",
)
@click.option(
    "--batch-interval",
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    help="Leader: seconds between passes of the batch controller.",
)
@click.option(
    "--workflow-interval",
    type=click.FloatRange(min=0.01),
    default=0.5,
    show_default=True,
    help="Leader: seconds between passes of the workflow controller.",
)
@click.option(
    "--leader-ttl",
    type=click.FloatRange(min=0.1),
    default=15.0,
    show_default=True,
    help="Seconds a dead leader keeps its role before another worker takes over.",
)
@_deadline_options
@click.option("--no-maintenance", is_flag=True, help="Never lead the maintenance services.")
@click.option(
    "--no-presence",
    is_flag=True,
    help="Do not register presence (behind a transaction-mode pooler, whose server sessions "
    "outlive this process): a killed worker's jobs then wait for their leases.",
)
@click.option(
    "--health-port",
    type=click.IntRange(0, 65_535),
    help="Serve /livez, /readyz and /metrics/keda on this port (off by default; 0: any).",
)
@click.option(
    "--health-host", default="0.0.0.0", show_default=True, help="Address for --health-port."
)
@click.option(
    "--metrics-port",
    type=click.IntRange(0, 65_535),
    help="Serve this worker's Prometheus /metrics on this port (off by default; 0: any).",
)
@click.option(
    "--metrics-host", default="0.0.0.0", show_default=True, help="Address for --metrics-port."
)
@click.option(
    "--retention",
    multiple=True,
    metavar="STATE=AGE",
    help="Leader: keep finished jobs of STATE (completed, cancelled, discarded) for AGE "
    "(e.g. 12h, 30d, forever); repeatable. Defaults: 24h, 24h, 14d.",
)
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="info: one line per finished job; warning: only retries, dead letters and trouble.",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="text for people; json: one object per line with job_id, task, outcome, duration.",
)
@click.option(
    "--quiet-queue",
    "quiet_queues",
    multiple=True,
    metavar="QUEUE",
    help="No INFO line per finished job of QUEUE (a hot queue); '*': every queue. Retries "
    "and dead letters are still logged at WARNING. Repeatable.",
)
@click.option(
    "--gc-threshold",
    type=click.IntRange(0, 1_000_000),
    default=GC_THRESHOLD,
    show_default=True,
    help="Objects this process may gain before Python's collector makes a pass; 0: "
    "Python's own (700). Jobs in flight keep thousands alive: at 700 the collector walks "
    "them again and again.",
)
# Set by the --processes supervisor for its children (WorkerSettings.exit_when_hung).
@click.option("--exit-when-hung", is_flag=True, hidden=True)
def worker(
    app_path: str | None,
    database_url: str | None,
    queue_spec: str,
    processes: int,
    grace: float,
    lease: float,
    heartbeat: float | None,
    poll_interval: float,
    fetch_batch: int,
    worker_id: str | None,
    rescue_interval: float,
    stage_interval: float,
    cron_interval: float,
    batch_interval: float,
    workflow_interval: float,
    leader_ttl: float,
    no_maintenance: bool,
    no_presence: bool,
    health_port: int | None,
    health_host: str,
    metrics_port: int | None,
    metrics_host: str,
    log_level: str,
    log_format: str,
    retention: tuple[str, ...] = (),
    capabilities: tuple[str, ...] = (),
    exit_when_hung: bool = False,
    quiet_queues: tuple[str, ...] = (),
    gc_threshold: int = GC_THRESHOLD,
    **deadlines: float | None,
) -> None:
    """Run jobs from the given queues until SIGTERM (drain) or a second SIGTERM (stop now)."""
    # A SIGTERM during start-up (Kubernetes may send one at any time) must still end in
    # a clean exit: remember it until the worker's own handlers are installed.
    early_stop: list[int] = []
    for signum in (signal.SIGTERM, signal.SIGINT, *REQUESTS):
        signal.signal(signum, lambda sig, _frame: early_stop.append(sig))
    # A supervisor starts its children with its requests blocked (supervisor.py): one sent
    # during start-up is delivered now, to the handler above.
    signal.pthread_sigmask(signal.SIG_UNBLOCK, REQUESTS)
    configure(log_level, log_format)
    if not app_path:
        raise click.UsageError("worker needs --app package.module:app (or $ROTA_APP)")
    try:
        queues = parse_queues(queue_spec)
        settings_kwargs = dict(
            queues=queues,
            grace=grace,
            lease=lease,
            heartbeat=heartbeat,
            poll_interval=poll_interval,
            fetch_batch=fetch_batch,
            maintenance=not no_maintenance,
            presence=not no_presence,
            rescue_interval=rescue_interval,
            stage_interval=stage_interval,
            cron_interval=cron_interval,
            batch_interval=batch_interval,
            workflow_interval=workflow_interval,
            leader_ttl=leader_ttl,
            health_port=health_port,
            health_host=health_host,
            metrics_port=metrics_port,
            metrics_host=metrics_host,
            capabilities=frozenset(capabilities),
            exit_when_hung=exit_when_hung,
            quiet_queues=frozenset(quiet_queues),
            **deadlines,
        )
        settings_kwargs.update(parse_retention(retention))
        WorkerSettings(**settings_kwargs)  # type: ignore[arg-type]  # validate before forking
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc)) from None
    if processes > 1 and health_port is not None:
        raise click.UsageError(
            "--health-port probes one worker process: run one process per pod "
            "(more pods, not --processes) to use it"
        )
    if processes > 1 and metrics_port is not None:
        raise click.UsageError(
            "--metrics-port serves one worker process: run one process per pod "
            "(more pods, not --processes) to use it"
        )
    if processes > 1:
        argv = [
            sys.executable,
            "-m",
            "rota",
            "worker",
            "--app",
            app_path,
            "--queues",
            queue_spec,
            "--grace",
            str(grace),
            "--lease",
            str(lease),
            "--poll-interval",
            str(poll_interval),
            "--fetch-batch",
            str(fetch_batch),
            "--rescue-interval",
            str(rescue_interval),
            "--stage-interval",
            str(stage_interval),
            "--cron-interval",
            str(cron_interval),
            "--batch-interval",
            str(batch_interval),
            "--workflow-interval",
            str(workflow_interval),
            "--leader-ttl",
            str(leader_ttl),
            "--log-level",
            log_level,
            "--log-format",
            log_format,
            "--gc-threshold",
            str(gc_threshold),
            # A child whose every slot is hung leaves; a fresh one takes its place.
            "--exit-when-hung",
        ]
        # The URL goes to the children through the environment, not argv: a password
        # on a command line is visible to every user of the machine (ps).
        if database_url:
            os.environ["ROTA_DATABASE_URL"] = database_url
        url_file = database_url_file()
        if url_file:
            os.environ["ROTA_DATABASE_URL_FILE"] = url_file
        if heartbeat is not None:
            argv += ["--heartbeat", str(heartbeat)]
        for flag, _, _ in _DEADLINES:
            value = deadlines[flag.removeprefix("--").replace("-", "_")]
            if value is not None:
                argv += [flag, str(value)]
        if no_maintenance:
            argv.append("--no-maintenance")
        if no_presence:
            argv.append("--no-presence")
        for kept in retention:
            argv += ["--retention", kept]
        for label in capabilities:
            argv += ["--capability", label]
        for quiet in quiet_queues:
            argv += ["--quiet-queue", quiet]
        sys.exit(supervise(argv, processes))
    app = load_app(app_path, database_url, creates=True)
    if worker_id:
        settings_kwargs["worker_id"] = worker_id
    settings = WorkerSettings(**settings_kwargs)  # type: ignore[arg-type]
    if not app.tasks:
        fail(f"{app_path} has no tasks registered")
    runner = Worker(app, settings)
    tune_gc(gc_threshold)

    async def main() -> None:
        runner.install_signal_handlers()
        for signum in early_stop:
            runner.on_signal(signal.Signals(signum).name)
        await runner.run()

    try:
        asyncio.run(main())
    except SchemaError as exc:
        fail(str(exc), code=EXIT_SCHEMA)
    except ConfigurationError as exc:  # e.g. the --health-port is taken
        fail(str(exc))
    finally:
        app.close()
    sys.stdout.flush()
    sys.stderr.flush()
    # Sync tasks still running past the grace cannot be interrupted; their jobs were
    # returned to the queue, so leave without waiting for their threads.
    os._exit(runner.exit_code)
