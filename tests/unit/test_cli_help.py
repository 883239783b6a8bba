"""Every `rota` command explains itself (#19): each option has help text, and each command's
--help ends with an example that the command really accepts."""

from __future__ import annotations

import shlex

import click
import pytest
from click.testing import CliRunner

from rota.cli.examples import EXAMPLES, commands
from rota.cli.main import cli

ALL = commands(cli)
LEAVES = {
    path: c for path, c in ALL.items() if not isinstance(c, click.Group) or c.invoke_without_command
}


def test_every_option_has_help_text() -> None:
    missing = [
        f"rota {path} {'/'.join(param.opts)}"
        for path, command in ALL.items()
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden and not (param.help or "").strip()
    ]
    assert not missing, "options without help text:\n" + "\n".join(missing)


def test_every_command_has_an_example() -> None:
    assert not sorted(set(LEAVES) - set(EXAMPLES)), "commands without an example"
    assert not sorted(set(EXAMPLES) - set(ALL)), "examples of commands that do not exist"


@pytest.mark.parametrize("path", sorted(EXAMPLES))
def test_each_example_is_in_its_help_and_parses(path: str) -> None:
    shown = CliRunner().invoke(cli, [*path.split(), "--help"], terminal_width=200)
    assert shown.exit_code == 0, shown.output
    for example in EXAMPLES[path]:
        assert example in shown.output
        argv = shlex.split(example.partition(" | ")[0])  # a pipe after it is the shell's
        assert argv[0] == "rota"
        args = argv[1:]
        assert " ".join(args[: len(path.split())]) == path
        # Parsing alone (no database): every option and argument of the example exists
        # and has a valid value.
        command = ALL[path]
        with command.make_context(path, args[len(path.split()) :], resilient_parsing=False):
            pass
