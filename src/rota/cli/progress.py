"""Progress bars for long CLI work (`rota db copy`, `rota db rotate-key`), on standard
error and only when it is a terminal: a pipe or a log file gets the summary alone."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Protocol

from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)


class Bars(Protocol):
    def __call__(self, label: str, done: int, total: int | None) -> None: ...


@contextmanager
def progress_bars(enabled: bool = True) -> Iterator[Bars | None]:
    """Yield `update(label, done, total)` (one bar per label; total None: a count that
    runs without an end), or None when nothing should be drawn."""
    from rota.cli.common import err_console

    if not enabled or not err_console.is_terminal:
        yield None
        return
    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
    )
    with Progress(*columns, console=err_console, transient=False) as progress:
        tasks: dict[str, TaskID] = {}

        def update(label: str, done: int, total: int | None) -> None:
            if label not in tasks:
                tasks[label] = progress.add_task(label, total=total)
            progress.update(tasks[label], completed=done, total=total)

        yield update
