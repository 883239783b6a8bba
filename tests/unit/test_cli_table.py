"""How a CLI listing fits a terminal (#19): headers never cut, the table never wider than the
terminal while a column can still go, empty and low-priority columns dropped first, long
text cut with an ellipsis, and user text shown as text with control and bidi escaped."""

from __future__ import annotations

import io

from hypothesis import given
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.console import Console

from rota.cli.table import Column, Listing, cut, tsv_cell, visible


def jobs_listing(rows: list[tuple[str, str, str]]) -> Listing:
    table = Listing(
        Column("id", justify="right"),
        Column("task", flex=True),
        "queue",
        Column("run at (UTC)", drop=1),
        Column("partition", drop=2),
        Column("last error", flex=True, least=24),
    )
    for n, (task, queue, error) in enumerate(rows):
        table.add_row(n, task, queue, "2026-12-02 07:00:00", "", error)
    return table


def rendered(table: Listing, width: int, wide: bool = False) -> list[str]:
    out = io.StringIO()
    console = Console(file=out, width=width, force_terminal=True, color_system=None)
    table.print(console=console, wide=wide)
    return out.getvalue().rstrip("\n").split("\n")


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=120)


@given(st.lists(st.tuples(text, st.text("abcdefghij", min_size=1, max_size=12), text), max_size=6))
def test_the_table_fits_80_columns_and_no_header_is_cut(rows: list[tuple[str, str, str]]) -> None:
    table = jobs_listing(rows)
    lines = rendered(table, 80)
    shown, widths = table.fit(80)
    assert all(widths[i] >= cell_len(table.columns[i].header) for i in shown)
    if sum(widths.values()) + 3 * (len(shown) - 1) <= 80:
        assert all(cell_len(line) <= 80 for line in lines), lines
    assert "\x00" not in "".join(lines) and "\u202e" not in "".join(lines)


def test_empty_then_low_priority_columns_go_first_and_errors_are_cut() -> None:
    error = "ValueError: order-1817: charging failed: " + "card declined " * 6
    table = jobs_listing([("shop.charge", "payments", error)])
    shown, _ = table.fit(80)
    headers = [table.columns[i].header for i in shown]
    assert headers == ["id", "task", "queue", "run at (UTC)", "last error"]  # no partition
    shown, _ = table.fit(60)  # narrower: the time goes, the error stays
    assert [table.columns[i].header for i in shown] == ["id", "task", "queue", "last error"]
    (row,) = [line for line in rendered(table, 60) if "shop.charge" in line]
    assert row.rstrip().endswith("…") and "order-1817" in row  # cut at the column, marked
    wide = "".join(rendered(table, 60, wide=True))
    assert "…" not in wide and "partition" not in wide


def test_user_text_is_text() -> None:
    assert visible("a\x00b\nc\u202ed") == "a\\x00b\\nc\\u202ed"
    assert visible("שלום [bold]x[/bold]") == "שלום [bold]x[/bold]"
    assert tsv_cell("a\tb\\c") == "a\\tb\\\\c"
    assert cut("order-1817", 7) == "order-…" and cut("short", 7) == "short"
    table = Listing("key", "error")
    table.add_row("order-[/usd]", "price field [/usd] missing")
    assert "price field [/usd] missing" in "\n".join(rendered(table, 80))
