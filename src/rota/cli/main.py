"""The `rota` command: a click group with the engine's commands and those each standard
feature names (Feature.commands), mounted in the features' order."""

from __future__ import annotations

import importlib
import io
import sys

import click

from rota import __version__
from rota.cli.dashboard import dashboard
from rota.cli.db import db
from rota.cli.enqueue import enqueue
from rota.cli.examples import attach as attach_examples
from rota.cli.jobs import jobs
from rota.cli.k8s import k8s
from rota.cli.metrics import metrics
from rota.cli.migrate import migrate
from rota.cli.queues import queues
from rota.cli.run import run
from rota.cli.scale import scale_hint_command
from rota.cli.worker import worker
from rota.standard import standard_features


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rota")
def cli() -> None:
    """rota: durable background jobs on SQLite or PostgreSQL."""
    # Stored text may hold what the terminal cannot encode (a lone surrogate written by an
    # older version, or by SQLite directly): show it escaped rather than crash (#17).
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


for _command in (migrate, worker, enqueue, jobs, queues, run, scale_hint_command, k8s, db):
    cli.add_command(_command)


def mount(root: click.Group, reference: str) -> None:
    """Mount what a feature names as "package.module:attribute": a click command is added
    to `root`; a function is called with `root` (to add subcommands to a group)."""
    module_name, _, attribute = reference.partition(":")
    target = getattr(importlib.import_module(module_name), attribute)
    if isinstance(target, click.Command):
        root.add_command(target)
    else:
        target(root)


for _feature in standard_features():
    for _reference in _feature.commands:
        mount(cli, _reference)

for _command in (metrics, dashboard):
    cli.add_command(_command)

attach_examples(cli)


def main() -> None:
    cli(prog_name="rota")
