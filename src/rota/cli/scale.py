"""`rota scale-hint`: the replica count a queue needs now, from its backlog and mean run
time, beside what KEDA would ask for with the same numbers (the query KEDA runs)."""

from __future__ import annotations

from functools import partial

import click

from rota.cli.common import app_options, json_option, load_app, print_json, run_guarded
from rota.drivers.base import BacklogReport, DurationReport
from rota.errors import ConfigurationError
from rota.k8s.scaling import ScaleHint, ScaleHintSettings, scale_hint
from rota.k8s.settings import Signal
from rota.labels import check_queue_name


def _text(hint: ScaleHint, settings: ScaleHintSettings, window: float) -> str:
    bounds = f"bounds {settings.min_replicas}..{settings.max_replicas}"
    lines = [
        f"queue {hint.queue}: {hint.backlog} runnable, {hint.running} running; "
        f"oldest waited {hint.oldest_age_s:.1f}s",
        f"  signal ({hint.signal.value}, what KEDA's query returns): {hint.value}",
    ]
    if hint.mean_s is None:
        lines.append(f"  mean run time: unknown (no job completed in the last {window:g}s)")
    else:
        lines.append(
            f"  mean run time: {hint.mean_s:.3f}s over {hint.samples} job(s) completed in the "
            f"last {window:g}s"
        )
    lines.append(
        f"  KEDA with target {settings.keda_target:g} per replica: {hint.keda_replicas} "
        f"replica(s) ({'active' if hint.active else 'inactive'}, {bounds})"
    )
    if hint.suggested_target is None:
        why = "the queue is empty" if hint.value == 0 else "no run time yet"
        lines.append(
            f"  desired: {hint.desired} replica(s) (from KEDA's rule: {why}; "
            "no targetQueryValue to suggest)"
        )
    else:
        drain = "" if hint.drain_s is None else f"; the present work takes ~{hint.drain_s:.0f}s"
        lines.append(
            f"  desired: {hint.desired} replica(s) to finish within "
            f"{settings.drain_within:g}s at {settings.concurrency} per replica ({bounds}){drain}"
        )
        lines.append(
            f"  targetQueryValue that asks for that: {hint.suggested_target:g} jobs per replica"
        )
    return "\n".join(lines)


@click.command("scale-hint")
@app_options
@click.option("--queue", "queues", multiple=True, required=True, help="Queue (repeatable).")
@click.option(
    "--concurrency",
    type=click.IntRange(1, 10_000),
    default=10,
    show_default=True,
    help="Jobs one replica runs at once on the queue (the worker's --queues value).",
)
@click.option(
    "--min",
    "min_replicas",
    type=click.IntRange(min=0),
    default=0,
    show_default=True,
    help="Fewest replicas (KEDA minReplicaCount; 0 scales to zero).",
)
@click.option(
    "--max",
    "max_replicas",
    type=click.IntRange(min=1),
    default=10,
    show_default=True,
    help="Most replicas (KEDA maxReplicaCount).",
)
@click.option("--target", type=float, help="KEDA's jobs per replica (default 2 x concurrency).")
@click.option(
    "--activation",
    type=float,
    default=0.0,
    show_default=True,
    help="Backlog above which a queue scaled to zero gets its first replica.",
)
@click.option(
    "--drain-within",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds in which the work present now should be done.",
)
@click.option(
    "--window",
    type=click.FloatRange(min=1),
    default=900.0,
    show_default=True,
    help="Mean run time over jobs completed in the last WINDOW seconds.",
)
@click.option(
    "--signal",
    type=click.Choice([s.value for s in Signal]),
    default=Signal.DEMAND.value,
    show_default=True,
    help="demand = runnable + running; backlog = runnable only.",
)
@json_option
def scale_hint_command(
    app_path: str | None,
    database_url: str | None,
    queues: tuple[str, ...],
    concurrency: int,
    min_replicas: int,
    max_replicas: int,
    target: float | None,
    activation: float,
    drain_within: float,
    window: float,
    signal: str,
    as_json: bool,
) -> None:
    """Print the replicas each queue needs now, and what KEDA would ask for."""
    try:
        for queue in queues:
            check_queue_name(queue, ConfigurationError)
        settings = ScaleHintSettings(
            concurrency=concurrency,
            min_replicas=min_replicas,
            max_replicas=max_replicas,
            target=target,
            activation=activation,
            drain_within=drain_within,
            signal=Signal(signal),
        )
    except ConfigurationError as exc:
        raise click.BadParameter(str(exc)) from None
    app = load_app(app_path, database_url)
    hints = []
    try:
        for queue in queues:
            backlog: BacklogReport = run_guarded(partial(app.driver.queue_backlog, queue))
            durations: DurationReport = run_guarded(
                partial(app.driver.queue_durations, queue, window)
            )
            hints.append(scale_hint(backlog, durations, settings))
    finally:
        app.close()
    if as_json:
        print_json(
            [
                {
                    "queue": h.queue,
                    "signal": h.signal.value,
                    "value": h.value,
                    "backlog": h.backlog,
                    "running": h.running,
                    "oldest_age_s": round(h.oldest_age_s, 3),
                    "mean_s": h.mean_s,
                    "samples": h.samples,
                    "active": h.active,
                    "keda_replicas": h.keda_replicas,
                    "desired": h.desired,
                    "suggested_target": h.suggested_target,
                    "drain_s": h.drain_s,
                }
                for h in hints
            ]
        )
        return
    click.echo("\n".join(_text(h, settings, window) for h in hints))
