"""`rota metrics`: the cluster-wide Prometheus metrics, read from the database, served
on a port or printed once."""

from __future__ import annotations

import asyncio
import signal
import sys

import click

from rota.cli.common import app_options, fail, load_app
from rota.errors import ConfigurationError
from rota.observe.cluster import ClusterCollector
from rota.telemetry.logging import configure
from rota.telemetry.prometheus import registry_of, render_text
from rota.telemetry.server import MetricsServer, metrics_app, metrics_token


@click.command()
@app_options
@click.option(
    "--port",
    type=click.IntRange(0, 65_535),
    default=9464,
    show_default=True,
    help="Serve GET /metrics on this port (0: any free port).",
)
@click.option("--host", default="0.0.0.0", show_default=True, help="Address to serve on.")
@click.option("--once", is_flag=True, help="Print the metrics once and exit (1 if unreadable).")
@click.option(
    "--cache",
    type=click.FloatRange(min=0),
    default=1.0,
    show_default=True,
    help="Seconds a reading is reused by further scrapes (protects the database).",
)
@click.option(
    "--log-format",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Log as text or as one JSON object per line.",
)
def metrics(
    app_path: str | None,
    database_url: str | None,
    port: int,
    host: str,
    once: bool,
    cache: float,
    log_format: str,
) -> None:
    """Cluster-wide metrics: jobs by queue and state, oldest waiting job, dead letters,
    live workers, the leader and schedule lag (docs/observability.md). Set
    $ROTA_METRICS_TOKEN to require it as a bearer token (docs/security.md)."""
    configure("warning" if once else "info", log_format)
    app = load_app(app_path, database_url, creates=True)  # a server: reports the database down
    collector = ClusterCollector(app.driver, cache_seconds=0.0 if once else cache)
    registry = registry_of(collector)
    try:
        if once:
            click.echo(render_text(registry), nl=False)
            if not collector.database_up:
                fail("could not read the database (see rota_database_up)")
            return
        web = metrics_app(registry, in_thread=True, token=metrics_token())
        server = MetricsServer(web, host, port)
        try:
            asyncio.run(_serve(server))
        except ConfigurationError as exc:  # the port is taken
            fail(str(exc))
    finally:
        app.close()
    sys.stdout.flush()


async def _serve(server: MetricsServer) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await server.start()
    click.echo(f"serving cluster metrics on http://{server.host}:{server.port}/metrics", err=True)
    try:
        await stop.wait()
    finally:
        await server.stop()
