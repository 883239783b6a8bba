"""The `rota` command: a click group that gathers the command modules."""

from __future__ import annotations

import click

from rota import __version__
from rota.cli.cron import cron
from rota.cli.enqueue import enqueue
from rota.cli.jobs import jobs
from rota.cli.k8s import k8s
from rota.cli.migrate import migrate
from rota.cli.queues import queues
from rota.cli.run import run
from rota.cli.scale import scale_hint_command
from rota.cli.worker import worker


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rota")
def cli() -> None:
    """rota: durable background jobs on SQLite or PostgreSQL."""


cli.add_command(migrate)
cli.add_command(worker)
cli.add_command(enqueue)
cli.add_command(jobs)
cli.add_command(queues)
cli.add_command(cron)
cli.add_command(run)
cli.add_command(scale_hint_command)
cli.add_command(k8s)


def main() -> None:
    cli(prog_name="rota")
