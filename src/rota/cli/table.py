"""Listings of the CLI: tab-separated values when stdout is not a terminal, and on a
terminal a table fitted to its width (headers never cut, empty or low-priority columns
dropped first, long text cut with an ellipsis unless --wide). Every cell is user text
printed as text: never rich markup, control and bidi characters shown escaped."""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import click
from rich import box
from rich.cells import cell_len, set_cell_size
from rich.console import Console
from rich.table import Table
from rich.text import Text

F = TypeVar("F", bound=Callable[..., Any])

# Characters that reorder the text around them on screen (a message could make a line
# read backwards) are shown as escapes, like control characters.
_BIDI = {
    "\u061c",
    "\u200e",
    "\u200f",
    *map(chr, range(0x202A, 0x202F)),
    *map(chr, range(0x2066, 0x206A)),
}
FLEX_MIN = 12  # the narrowest a free-text column gets before columns are dropped


def visible(text: str) -> str:
    """`text` with control and bidi characters as escapes (`\\x00`, `\\n`, `\\u202e`)."""
    if text.isprintable():
        return text
    out = []
    for ch in text:
        if ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif ch in _BIDI or unicodedata.category(ch) in ("Cc", "Cs"):
            code = ord(ch)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(ch)
    return "".join(out)


def tsv_cell(text: str) -> str:
    """One cell of a tab-separated line: backslashes doubled, then `visible`."""
    return visible(text.replace("\\", "\\\\"))


def cut(text: str, width: int) -> str:
    """`text` fitted to `width` cells, ending with an ellipsis when it was longer."""
    if cell_len(text) <= width:
        return text
    return set_cell_size(text, max(width - 1, 0)) + "…"


@dataclass(frozen=True)
class Column:
    header: str
    flex: bool = False  # free text (errors, tasks): shrinks to fit, cut with an ellipsis
    drop: int = 0  # 0: always shown; columns with higher numbers go first on a narrow screen
    least: int = FLEX_MIN  # a flex column this narrow is useless: drop others first
    justify: Literal["left", "right"] = "left"


class Listing:
    """Rows of text under headers, printed for a pipe or for the terminal's width."""

    def __init__(self, *columns: Column | str, title: str | None = None) -> None:
        self.columns = [c if isinstance(c, Column) else Column(c) for c in columns]
        self.rows: list[list[str]] = []
        self.title = title

    def add_row(self, *cells: object) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append(["" if c is None else str(c) for c in cells])

    def print(self, *, wide: bool = False, console: Console | None = None) -> None:
        if console is None:
            from rota.cli.common import console as default

            console = default
        if not console.is_terminal:
            self.print_tsv()
            return
        shown, widths = self.fit(console.width, wide=wide)
        table = Table(
            box=box.SIMPLE_HEAD,
            show_edge=False,
            pad_edge=False,
            title=self.title,
            title_justify="left",
        )
        for i in shown:
            column = self.columns[i]
            table.add_column(
                column.header,
                justify=column.justify,
                no_wrap=not wide,
                overflow="fold",
                min_width=None if wide else widths[i],
                max_width=None if wide else widths[i],
            )
        for row in self.rows:
            cells = [visible(row[i]) for i in shown]
            if not wide:
                cells = [cut(cell, widths[i]) for cell, i in zip(cells, shown, strict=True)]
            table.add_row(*(Text(cell) for cell in cells))
        console.print(table)
        hidden = [
            c.header
            for i, c in enumerate(self.columns)
            if i not in shown and any(r[i] for r in self.rows)
        ]
        if hidden and self.rows:
            console.print(
                Text(f"(hidden at this width: {', '.join(hidden)}; --json or a pipe shows all)"),
                style="dim",
            )

    def print_tsv(self) -> None:
        lines = ["\t".join(tsv_cell(c.header) for c in self.columns)]
        lines.extend("\t".join(tsv_cell(cell) for cell in row) for row in self.rows)
        click.echo("\n".join(lines))

    def fit(self, width: int, *, wide: bool = False) -> tuple[list[int], dict[int, int]]:
        """Which columns to show and how wide, for a terminal `width` cells wide."""
        natural = {
            i: max([cell_len(c.header)] + [cell_len(visible(r[i])) for r in self.rows])
            for i, c in enumerate(self.columns)
        }
        shown = list(range(len(self.columns)))
        # Columns empty in every row say nothing: drop the optional ones first.
        empty = [i for i in shown if self.columns[i].drop and not any(r[i] for r in self.rows)]
        order = empty + sorted(
            (i for i in shown if self.columns[i].drop and i not in empty),
            key=lambda i: (-self.columns[i].drop, -i),
        )
        if wide:
            return [i for i in shown if i not in empty], natural
        for i in empty:
            shown.remove(i)
        widths = self._share(shown, natural, width)
        while widths is None and order:
            victim = order.pop(0)
            if victim in shown:
                shown.remove(victim)
            widths = self._share(shown, natural, width)
        if widths is None:  # nothing left to drop: flex columns as narrow as their headers
            widths = self._share(shown, natural, width, relaxed=True)
        if widths is None:  # still too wide: the terminal cuts the lines
            widths = {i: natural[i] for i in shown}
        return shown, widths

    def _share(
        self, shown: Sequence[int], natural: dict[int, int], width: int, relaxed: bool = False
    ) -> dict[int, int] | None:
        room = width - 3 * (len(shown) - 1)
        widths = {i: natural[i] for i in shown}
        if sum(widths.values()) <= room:
            return widths
        flex = [i for i in shown if self.columns[i].flex]
        left = room - sum(natural[i] for i in shown if i not in flex)
        floor = {}
        for i in flex:
            header = cell_len(self.columns[i].header)
            floor[i] = min(natural[i], header if relaxed else max(self.columns[i].least, header))
        if not flex or left < sum(floor.values()):
            return None
        # Each flex column gets its floor, then the rest is shared: the smallest wishes are
        # met first and what they leave goes to the others.
        extra = left - sum(floor.values())
        wishes = sorted(flex, key=lambda i: natural[i] - floor[i])
        for n, i in enumerate(wishes):
            give = min(natural[i] - floor[i], extra // (len(wishes) - n))
            widths[i] = floor[i] + give
            extra -= give
        return widths


def wide_option(func: F) -> F:
    return click.option(
        "--wide",
        is_flag=True,
        help="Show long text (errors, tasks) in full, wrapped, instead of cut with an ellipsis.",
    )(func)


def json_text(value: Any) -> str:
    """A stored value as compact JSON (what `--json` prints), never a Python repr."""
    import json

    return json.dumps(value, ensure_ascii=False, default=str, separators=(", ", ": "))


def say(*parts: str | tuple[str, str], console: Console | None = None) -> None:
    """Print one line of plain pieces and (text, style) pairs: user text is never
    markup, and its control and bidi characters are shown escaped."""
    if console is None:
        from rota.cli.common import console as default

        console = default
    pieces = [(visible(p), "") if isinstance(p, str) else (visible(p[0]), p[1]) for p in parts]
    console.print(Text.assemble(*pieces), highlight=False, soft_wrap=True)
