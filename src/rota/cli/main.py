"""The `rota` command: a click group with the engine's commands and those each standard
feature names (Feature.commands), mounted in the features' order. The commands that bring
a heavy stack (the web server, YAML, key handling) load when they are run or listed, so
`rota worker` carries none of it."""

from __future__ import annotations

import importlib
import io
import sys
from typing import Any

import click

from rota import __version__
from rota.cli.enqueue import enqueue
from rota.cli.examples import attach as attach_examples
from rota.cli.jobs import jobs
from rota.cli.migrate import migrate
from rota.cli.queues import queues
from rota.cli.run import run
from rota.cli.worker import worker
from rota.standard import standard_features

# Commands loaded on first use, by name: "package.module:attribute".
LAZY = {
    "scale-hint": "rota.cli.scale:scale_hint_command",
    "k8s": "rota.cli.k8s:k8s",
    "db": "rota.cli.db:db",
    "metrics": "rota.cli.metrics:metrics",
    "dashboard": "rota.cli.dashboard:dashboard",
}


def load(reference: str) -> Any:
    module_name, _, attribute = reference.partition(":")
    return getattr(importlib.import_module(module_name), attribute)


class LazyGroup(click.Group):
    """A group whose LAZY commands are imported when they are run, or when the help lists
    them."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *LAZY})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in LAZY and cmd_name not in self.commands:
            command = load(LAZY[cmd_name])
            attach_examples(command, cmd_name + " ")
            self.add_command(command, cmd_name)
        return super().get_command(ctx, cmd_name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="rota")
def cli() -> None:
    """rota: durable background jobs on SQLite or PostgreSQL."""
    # Stored text may hold what the terminal cannot encode (a lone surrogate written by an
    # older version, or by SQLite directly): show it escaped rather than crash (#17).
    for stream in (sys.stdout, sys.stderr):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(errors="backslashreplace")


for _command in (migrate, worker, enqueue, jobs, queues, run):
    cli.add_command(_command)


def mount(root: click.Group, reference: str) -> None:
    """Mount what a feature names as "package.module:attribute": a click command is added
    to `root`; a function is called with `root` (to add subcommands to a group)."""
    target = load(reference)
    if isinstance(target, click.Command):
        root.add_command(target)
    else:
        target(root)


for _feature in standard_features():
    for _reference in _feature.commands:
        mount(cli, _reference)

attach_examples(cli)


def main() -> None:
    cli(prog_name="rota")
