"""`rota k8s render` (manifests for a rota app, as YAML or a kustomize folder) and
`rota k8s metrics-api` (the small always-on server KEDA's metrics-api scaler asks)."""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path
from typing import TypeVar

import click

from rota.cli.common import app_options, err_console, fail, load_app
from rota.drivers.base import BacklogReport
from rota.errors import ConfigurationError, RotaError
from rota.k8s.output import to_yaml, write_folder
from rota.k8s.settings import RenderSettings, Scaler, Signal, UrlSource, WorkerGroup
from rota.settings import parse_queues
from rota.telemetry.logging import configure

T = TypeVar("T")


@click.group()
def k8s() -> None:
    """Kubernetes: render manifests, serve KEDA's metrics."""


def _per_group(option: str, values: tuple[T, ...], groups: int, default: T) -> list[T]:
    """An option given once applies to every --queue group; given several times, the
    n-th value goes with the n-th --queue."""
    if not values:
        return [default] * groups
    if len(values) == 1:
        return list(values) * groups
    if len(values) != groups:
        raise click.UsageError(
            f"{option} was given {len(values)} times for {groups} --queue group(s): give it "
            "once (for every group) or once per --queue, in the same order"
        )
    return list(values)


@k8s.command()
@click.option(
    "--app",
    "app_path",
    envvar="ROTA_APP",
    required=True,
    help="Your app as package.module:attribute (not imported: rendering needs no database).",
)
@click.option("--image", default="your-app:latest", show_default=True, help="Container image.")
@click.option("--name", default="rota", show_default=True, help="Prefix of every object's name.")
@click.option(
    "--namespace", default="default", show_default=True, help="Namespace of every object."
)
@click.option(
    "--queue",
    "queue_specs",
    multiple=True,
    help="A worker Deployment's queues and per-replica concurrency, e.g. tickets=4 or "
    "reports=1,emails=2 (repeat for more Deployments; default: default=10).",
)
@click.option("--min", "mins", multiple=True, type=click.IntRange(min=0), help="minReplicaCount.")
@click.option("--max", "maxes", multiple=True, type=click.IntRange(min=1), help="maxReplicaCount.")
@click.option(
    "--target",
    "targets",
    multiple=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Jobs per replica KEDA aims for (default: 2 x the queue's concurrency).",
)
@click.option(
    "--activation",
    "activations",
    multiple=True,
    type=click.FloatRange(min=0),
    help="Scale from 0 only when the signal is above this (default 0).",
)
@click.option("--group-name", "group_names", multiple=True, help="Name of a --queue group.")
@click.option(
    "--scaler",
    type=click.Choice([s.value for s in Scaler]),
    default=Scaler.POSTGRESQL.value,
    show_default=True,
    help="postgresql: KEDA calls the rota_keda_* functions; metrics-api: it asks /metrics/keda.",
)
@click.option(
    "--signal",
    type=click.Choice([s.value for s in Signal]),
    default=Signal.DEMAND.value,
    show_default=True,
    help="demand = runnable + running jobs; backlog = runnable only.",
)
@click.option(
    "--grace",
    type=click.FloatRange(min=0),
    default=30.0,
    show_default=True,
    help="The workers' --grace; terminationGracePeriodSeconds adds a margin.",
)
@click.option(
    "--polling-interval",
    type=click.IntRange(min=1),
    default=30,
    show_default=True,
    help="Seconds between KEDA's looks at the backlog (pollingInterval).",
)
@click.option(
    "--cooldown",
    type=click.IntRange(min=0),
    default=300,
    show_default=True,
    help="Seconds after the last activity before scaling to zero (cooldownPeriod).",
)
@click.option(
    "--fallback-failures",
    type=click.IntRange(min=1),
    default=3,
    show_default=True,
    help="Failed backlog reads before KEDA falls back to a fixed replica count.",
)
@click.option(
    "--fallback-replicas",
    type=click.IntRange(min=0),
    help="Replicas while the scaler fails (default: max(1, --min)).",
)
@click.option("--cpu", default="250m", show_default=True, help="CPU request of a worker.")
@click.option("--memory", default="256Mi", show_default=True, help="Memory request and limit.")
@click.option(
    "--health-port",
    type=click.IntRange(1, 65_535),
    default=8081,
    show_default=True,
    help="Port of the workers' /livez and /readyz probes.",
)
@click.option(
    "--database-secret",
    default="rota-database",
    show_default=True,
    help="Secret holding the workers' database URL.",
)
@click.option(
    "--metrics-secret",
    default="rota-metrics-database",
    show_default=True,
    help="Secret holding the read-only rota_metrics database URL.",
)
@click.option(
    "--token-secret",
    default="rota-metrics-token",
    show_default=True,
    help="Secret holding the bearer token of /metrics/keda.",
)
@click.option(
    "--database-url-from",
    type=click.Choice([u.value for u in UrlSource]),
    default=UrlSource.ENV.value,
    show_default=True,
    help="env: $ROTA_DATABASE_URL from the Secret; file: the Secret mounted as a file "
    "($ROTA_DATABASE_URL_FILE), re-read for each new connection (password rotation).",
)
@click.option(
    "--run-as-user",
    type=click.IntRange(1, 2**31 - 1),
    default=10_001,
    show_default=True,
    help="The pods' user id (runAsNonRoot; the image's files must be readable by it).",
)
@click.option(
    "--dashboard", is_flag=True, help="Also render `rota dashboard`: Deployment, Service."
)
@click.option(
    "--dashboard-host",
    help="Add an Ingress for the dashboard with this host name (e.g. ops.example.com).",
)
@click.option(
    "--dashboard-path",
    default="/",
    show_default=True,
    help="Serve the dashboard under this path (the Ingress path and its --root-path).",
)
@click.option("--dashboard-tls-secret", help="The Ingress's TLS Secret (and Secure cookies).")
@click.option("--dashboard-ingress-class", help="The Ingress's ingressClassName.")
@click.option(
    "--dashboard-replicas",
    type=click.IntRange(1, 20),
    default=1,
    show_default=True,
    help="Replicas of the dashboard Deployment (with --dashboard).",
)
@click.option(
    "--dashboard-database-secret",
    help="The dashboard's database URL Secret (default: --database-secret). Its role must "
    "read rota_api_tokens: the owner, or PREFIX_deadletters for a read-only dashboard.",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Write a kustomize folder (kubectl apply -k DIR) instead of printing YAML.",
)
def render(
    app_path: str,
    image: str,
    name: str,
    namespace: str,
    queue_specs: tuple[str, ...],
    mins: tuple[int, ...],
    maxes: tuple[int, ...],
    targets: tuple[float, ...],
    activations: tuple[float, ...],
    group_names: tuple[str, ...],
    scaler: str,
    signal: str,
    grace: float,
    polling_interval: int,
    cooldown: int,
    fallback_failures: int,
    fallback_replicas: int | None,
    cpu: str,
    memory: str,
    health_port: int,
    database_secret: str,
    metrics_secret: str,
    token_secret: str,
    database_url_from: str,
    run_as_user: int,
    dashboard: bool,
    dashboard_host: str | None,
    dashboard_path: str,
    dashboard_tls_secret: str | None,
    dashboard_ingress_class: str | None,
    dashboard_replicas: int,
    dashboard_database_secret: str | None,
    out: Path | None,
) -> None:
    """Print ready-to-apply manifests: the migration Job, per --queue group a worker
    Deployment, PodDisruptionBudget and KEDA ScaledObject, and with --dashboard the
    dashboard's Deployment, Service and (with --dashboard-host) Ingress.

    --min, --max, --target, --activation given once apply to every --queue group; given
    once per --queue, the n-th goes with the n-th group."""
    specs = queue_specs or ("default=10",)
    count = len(specs)
    if len(group_names) not in (0, count):
        raise click.UsageError("give --group-name once per --queue, or not at all")
    try:
        groups = tuple(
            WorkerGroup(
                queues=parse_queues(spec),
                min_replicas=low,
                max_replicas=high,
                target=target,
                activation=activation,
                name=group_names[i] if group_names else None,
            )
            for i, (spec, low, high, target, activation) in enumerate(
                zip(
                    specs,
                    _per_group("--min", mins, count, 0),
                    _per_group("--max", maxes, count, 10),
                    _per_group("--target", tuple[float | None, ...](targets), count, None),
                    _per_group("--activation", activations, count, 0.0),
                    strict=True,
                )
            )
        )
        settings = RenderSettings(
            app=app_path,
            groups=groups,
            image=image,
            name=name,
            namespace=namespace,
            database_secret=database_secret,
            metrics_secret=metrics_secret,
            token_secret=token_secret,
            scaler=Scaler(scaler),
            signal=Signal(signal),
            grace=grace,
            polling_interval=polling_interval,
            cooldown_period=cooldown,
            fallback_failures=fallback_failures,
            fallback_replicas=fallback_replicas,
            cpu=cpu,
            memory=memory,
            health_port=health_port,
            database_url_from=UrlSource(database_url_from),
            run_as_user=run_as_user,
            dashboard=dashboard,
            dashboard_host=dashboard_host,
            dashboard_path=dashboard_path,
            dashboard_tls_secret=dashboard_tls_secret,
            dashboard_ingress_class=dashboard_ingress_class,
            dashboard_replicas=dashboard_replicas,
            dashboard_database_secret=dashboard_database_secret,
        )
    except ConfigurationError as exc:
        raise click.UsageError(str(exc)) from None
    if out is None:
        click.echo(to_yaml(settings), nl=False)
        return
    for path in write_folder(settings, out):
        err_console.print(f"wrote {path}", highlight=False, markup=False)


@k8s.command("metrics-api")
@app_options
@click.option(
    "--port",
    type=click.IntRange(0, 65_535),
    default=8080,
    show_default=True,
    help="Port to serve on.",
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to serve on.")
@click.option(
    "--log-level",
    type=click.Choice(["debug", "info", "warning", "error"]),
    default="info",
    show_default=True,
    help="How much the server logs.",
)
def metrics_api(
    app_path: str | None, database_url: str | None, port: int, host: str, log_level: str
) -> None:
    """Serve GET /metrics/keda?queue=NAME -> {"queue", "backlog", "running",
    "oldest_age_s", "demand"} for KEDA's metrics-api scaler, until SIGTERM. Set
    $ROTA_METRICS_TOKEN to require it as a bearer token. Counts only, never payloads."""
    # uvicorn and starlette load only for the commands that serve HTTP.
    from rota.worker.health import (
        MAX_LOOP_LAG,
        TOKEN_ENV,
        HealthServer,
        LoopMonitor,
        Probe,
        build_app,
    )

    configure(log_level, "json")
    app = load_app(app_path, database_url, creates=True)
    monitor = LoopMonitor()

    def live() -> Probe:
        lag = round(monitor.lag, 3)
        return Probe(lag <= MAX_LOOP_LAG, {"loop_lag_s": lag})

    async def backlog(queue: str) -> BacklogReport:
        return await asyncio.to_thread(app.driver.queue_backlog, queue)

    web = build_app(
        live=live,
        ready=lambda: Probe(True),
        backlog=backlog,
        token=os.environ.get(TOKEN_ENV) or None,
    )

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        server = HealthServer(web, host, port, monitor)
        await server.start()
        try:
            await stop.wait()
        finally:
            await server.stop()

    try:
        asyncio.run(main())
    except RotaError as exc:
        fail(str(exc))
    finally:
        app.close()
