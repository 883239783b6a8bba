"""The `rota` command: a click group that gathers the command modules."""

from __future__ import annotations

import io
import sys

import click

from rota import __version__
from rota.cli.batches import batches
from rota.cli.cron import cron
from rota.cli.dashboard import dashboard
from rota.cli.db import db
from rota.cli.dlq import dlq
from rota.cli.enqueue import enqueue
from rota.cli.events import events
from rota.cli.holds import add_hold_commands
from rota.cli.jobs import jobs
from rota.cli.k8s import k8s
from rota.cli.metrics import metrics
from rota.cli.migrate import migrate
from rota.cli.queues import queues
from rota.cli.routing import add_routing_commands
from rota.cli.run import run
from rota.cli.sagas import sagas
from rota.cli.scale import scale_hint_command
from rota.cli.tenants import tenants
from rota.cli.tokens import tokens
from rota.cli.worker import worker
from rota.cli.workflows import workflows


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rota")
def cli() -> None:
    """rota: durable background jobs on SQLite or PostgreSQL."""
    # Stored text may hold what the terminal cannot encode (a lone surrogate written by an
    # older version, or by SQLite directly): show it escaped rather than crash (#17).
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


cli.add_command(migrate)
cli.add_command(worker)
cli.add_command(enqueue)
cli.add_command(jobs)
cli.add_command(queues)
add_hold_commands(queues)  # rota queues window|breaker|holds
add_routing_commands(queues)  # rota queues unroutable
cli.add_command(dlq)
cli.add_command(cron)
cli.add_command(batches)
cli.add_command(workflows)
cli.add_command(sagas)
cli.add_command(events)
cli.add_command(run)
cli.add_command(scale_hint_command)
cli.add_command(k8s)
cli.add_command(db)
cli.add_command(metrics)
cli.add_command(dashboard)
cli.add_command(tokens)
cli.add_command(tenants)


def main() -> None:
    cli(prog_name="rota")
