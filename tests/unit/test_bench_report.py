"""The benchmark's arithmetic (bench/report.py, bench/runner.py's options): ratios within a
run, medians across runs, size ratios against the empty table and the issues' targets.
No database and no peer venvs: the measurements themselves run only with `make bench`."""

from __future__ import annotations

import math

import pytest

from bench import raw, report
from bench.runner import parse_args


def run(**values: float) -> dict[str, float]:
    report.add_ratios(values)
    return values


def test_ratios_are_taken_inside_each_run_then_the_median() -> None:
    # The baseline swings between runs (a shared machine); rota moves with it.
    runs = [
        {"postgres": run(drain_cli=10_000, drain_baseline=20_000, drain_pgqueuer=5_000)},
        {"postgres": run(drain_cli=6_000, drain_baseline=10_000, drain_pgqueuer=4_000)},
        {"postgres": run(drain_cli=9_000, drain_baseline=30_000, drain_pgqueuer=9_000)},
    ]
    summary = report.medians(runs)["postgres"]
    assert summary["ratio_cli"] == pytest.approx(0.5)  # of 0.5, 0.6, 0.3
    assert summary["ratio_cli_pgqueuer"] == pytest.approx(1.5)  # of 2.0, 1.5, 1.0
    # Not the ratio of the medians (9,000 / 20,000 = 0.45).
    assert summary["drain_cli"] / summary["drain_baseline"] == pytest.approx(0.45)


def test_single_enqueue_is_read_against_the_raw_insert_of_the_same_run() -> None:
    values = run(enqueue_single=1_400, enqueue_single_raw=1_800, pgqueuer_enqueue_single=1_600)
    assert values["ratio_enqueue_single_raw"] == pytest.approx(1_400 / 1_800)
    assert values["ratio_pgqueuer_enqueue_single_raw"] == pytest.approx(1_600 / 1_800)
    assert values["ratio_enqueue_single_pgqueuer"] == pytest.approx(1_400 / 1_600)


def test_a_missing_or_zero_denominator_gives_no_ratio() -> None:
    values = run(drain_cli=1_000, drain_pgqueuer=0.0)
    assert "ratio_cli" not in values
    assert "ratio_cli_pgqueuer" not in values


def test_a_drain_with_paired_empty_drains_is_compared_with_those() -> None:
    values = run(
        size_finished_0_drain=20_000,
        size_dead_1000000_drain=9_000,
        size_dead_1000000_drain_empty=10_000,
    )
    assert values["size_dead_1000000_drain_ratio"] == pytest.approx(0.9)
    assert "size_dead_1000000_drain_empty_ratio" not in values
    fed = run(size_finished_1000000_steady=9_500, size_finished_1000000_steady_empty=10_000)
    assert fed["size_finished_1000000_steady_ratio"] == pytest.approx(0.95)
    assert "size_finished_1000000_steady_empty_ratio" not in fed
    lines = report.markdown({"medians": {"postgres": values}})
    assert "empty table in the same rounds" in lines


def test_a_latency_with_a_paired_empty_table_is_compared_with_that() -> None:
    """The latency beside a history comes after its paired drains and steady runs, which
    leave rows of their own: the empty table after the same runs is its measure."""
    values = run(
        size_finished_0_latency_p50=2.0,
        size_finished_200000_latency_p50=6.0,
        size_finished_200000_latency_p50_empty=5.0,
    )
    assert values["size_finished_200000_latency_p50_ratio"] == pytest.approx(1.2)
    assert "size_finished_200000_latency_p50_empty_ratio" not in values
    lines = report.markdown({"medians": {"postgres": values}})
    assert "latency p50, empty table after the same runs" in lines


def test_sizes_are_compared_with_the_empty_table_of_the_same_run() -> None:
    values = run(
        size_finished_0_drain=5_000,
        size_finished_0_latency_p50=2.0,
        size_finished_200000_drain=500,
        size_finished_200000_latency_p50=3.0,
        size_dead_200000_drain=4_750,
    )
    assert values["size_finished_200000_drain_ratio"] == pytest.approx(0.1)
    assert values["size_finished_200000_latency_p50_ratio"] == pytest.approx(1.5)
    assert values["size_dead_200000_drain_ratio"] == pytest.approx(0.95)
    assert "size_finished_0_drain_ratio" not in values
    checks = {c["target"]: c["met"] for c in report.evaluate({"postgres": values})}
    assert checks == {
        "drain beside 200,000 finished jobs": False,
        "drain beside 200,000 dead letters": True,
    }


def test_targets_of_issue_16() -> None:
    summary = {
        "postgres": run(
            drain_cli=15_000,
            drain_baseline=30_000,
            drain_pgqueuer=10_000,
            enqueue_single=1_000,
            pgqueuer_enqueue_single=2_000,
            enqueue_bulk=60_000,
            pgqueuer_enqueue_bulk=60_000,
            latency_p50=2.9,
            latency_p99=10.0,
            drain_features=14_000,
            drain_features_plain=15_000,  # the plain drains around it
            idle_rss_mb=59.0,
        ),
        "sqlite": run(
            drain_cli=20_000,
            drain_baseline=100_000,
            drain_huey=2_000,
            idle_cpu_pct=1.0,
        ),
    }
    met = {(c["dialect"], c["target"]): c["met"] for c in report.evaluate(summary)}
    assert met == {
        ("postgres", "drain vs pgqueuer"): True,  # exactly 1.5x
        ("postgres", "drain vs raw loop"): True,  # exactly 50%
        ("postgres", "single enqueue vs pgqueuer"): False,
        ("postgres", "bulk enqueue vs pgqueuer"): True,  # equal is enough
        ("postgres", "enqueue-to-start p50"): True,
        ("postgres", "enqueue-to-start p99"): False,  # must be below 10 ms
        ("postgres", "plain queue, features in use"): False,  # 93% < 95%
        ("postgres", "idle worker memory"): True,
        ("sqlite", "drain vs huey"): True,  # exactly 10x
        ("sqlite", "drain vs raw loop"): False,  # 20% < 30%
        ("sqlite", "idle worker CPU"): False,  # must be below 1%
    }


def test_percentiles_interpolate_between_samples() -> None:
    assert report.percentile([1.0, 2.0, 3.0, 4.0], 50) == pytest.approx(2.5)
    assert report.percentile([5.0], 99) == 5.0
    assert math.isnan(report.percentile([], 50))


def test_size_options_accept_lists_and_repeats() -> None:
    args = parse_args(["--finished", "0,200000", "--finished", "1e6"])
    assert args.finished == [200_000, 1_000_000]  # the empty table is always measured
    assert parse_args([]).finished == [200_000]
    assert parse_args(["--quick"]).finished == [20_000]
    with pytest.raises(SystemExit):
        parse_args(["--finished", "lots"])


def test_a_lived_history_is_made_by_one_worker_process_unless_asked() -> None:
    assert parse_args(["--lived", "dead"]).lived_processes == 1
    assert parse_args(["--lived", "--lived-processes", "2"]).lived_processes == 2


@pytest.mark.parametrize(
    ("option", "error"),
    [
        ("--lived-processes", "at least 1"),
        ("--size-rounds", "at least 1"),
        ("--runs", "at least 1"),
        ("--jobs", "at least 1"),
        ("--steady-seconds", "more than 0"),
    ],
)
def test_a_zero_given_is_refused_not_taken_for_the_default(
    option: str, error: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        parse_args([option, "0"])
    assert f"{option} must be {error}" in capsys.readouterr().err


def test_markdown_shows_the_tables_and_the_targets() -> None:
    values = run(
        drain_cli=9_000,
        drain_baseline=30_000,
        drain_pgqueuer=15_000,
        size_finished_0_drain=9_000,
        size_finished_1000000_drain=900,
    )
    text = report.markdown({"medians": {"postgres": values}})
    assert "| drain, rota worker (CLI) (jobs/s) | 9,000 |" in text
    assert "| &nbsp;&nbsp;rota CLI / pgqueuer | 0.60x |" in text
    assert "| 1,000,000 | drain (jobs/s) | 900 (10%) |" in text
    assert "| PostgreSQL: drain vs pgqueuer | >= 1.5x | 0.60x | **no** |" in text


def test_the_drain_target_is_read_against_the_fastest_raw_loop_of_the_run() -> None:
    # 1.5x pgqueuer against the faster of the psycopg and asyncpg raw loops.
    values = run(
        drain_cli=25_000,
        drain_pgqueuer=20_000,
        drain_baseline=27_000,
        drain_baseline_asyncpg=30_000,
    )
    assert values["ratio_drain_target_raw"] == pytest.approx(1.5 * 20_000 / 30_000)
    assert values["ratio_cli_asyncpg"] == pytest.approx(25_000 / 30_000)
    assert values["ratio_pgqueuer_asyncpg"] == pytest.approx(20_000 / 30_000)
    sqlite = run(drain_cli=20_000, drain_huey=4_000, drain_baseline=48_000)
    assert sqlite["ratio_drain_target_raw"] == pytest.approx(10 * 4_000 / 48_000)


def test_the_asyncpg_loops_run_the_psycopg_loops_sql_with_numbered_placeholders() -> None:
    sql, names = raw.positional("SELECT %(a)s, %(b)s::int, %(a)s")
    assert (sql, names) == ("SELECT $1, $2::int, $1", ["a", "b"])
    drain = raw.asyncpg_drain("lean")
    assert "%(" not in drain["claim"] + drain["complete"]
    assert drain["claim_params"] == ["queue", "limit", "worker", "lease"]
    # rota's claim carries the completions: every c_* array but the ids and tokens is
    # one value repeated.
    carrying = raw.asyncpg_drain("rota")
    assert "%(" not in carrying["claim"]
    assert {"c_id", "c_token", "queue", "limit"} <= set(carrying["claim_params"])
    assert set(carrying["carried"]) == {
        n for n in carrying["claim_params"] if n.startswith("c_")
    } - {
        "c_id",
        "c_token",
    }
    insert = raw.asyncpg_insert("bench.noop_async")
    assert insert["insert_params"] == ["task", "queue", "args"]
