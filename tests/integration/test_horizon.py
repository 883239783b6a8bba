"""The leader says when a transaction holds PostgreSQL's xmin horizon (#23): once per
transaction, as a metric and in GET /api/database; SQLite has no horizon and says n/a."""

from __future__ import annotations

import logging

import psycopg
import pytest
from prometheus_client import generate_latest

import rota
from rota.maintenance.horizon import HorizonWatch, horizon_holders
from rota.observe.cluster import cluster_registry
from tests.helpers import wait_for


def test_a_transaction_holding_the_horizon_is_reported_once(
    pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    app = rota.App(pg_url)
    app.migrate()
    watch = HorizonWatch(app.driver, threshold=0.0)
    try:
        with psycopg.connect(pg_url) as holder:
            holder.execute("SET application_name = 'nightly-report'")
            holder.commit()
            holder.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            holder.execute("SELECT count(*) FROM rota_jobs")  # a snapshot, left idle
            pid = holder.info.backend_pid
            with caplog.at_level(logging.WARNING, logger="rota.maintenance"):
                first = watch.run_once()
                second = watch.run_once()
            warnings = [r.getMessage() for r in caplog.records if "xmin horizon" in r.getMessage()]
            assert first.warned >= 1 and second.warned == 0
            assert any(f"pid {pid}" in w and "nightly-report" in w for w in warnings), warnings
            assert any(w.count(f"pid {pid} ") == 1 for w in warnings)
            assert len([w for w in warnings if f"pid {pid} " in w]) == 1  # once, not per pass
            held = [h for h in horizon_holders(app.driver) or [] if h.holder == str(pid)]
            assert held and held[0].state == "idle in transaction"
            scraped = generate_latest(cluster_registry(app.driver)).decode()
            assert "rota_database_xmin_horizon_age_seconds" in scraped
            assert "rota_database_xmin_horizon_held" in scraped  # 1 only past 60 s
        # The transaction ended: the holder is gone (once the server saw the session
        # close) and forgotten.
        wait_for(
            lambda: not [h for h in horizon_holders(app.driver) or [] if h.holder == str(pid)],
            timeout=10,
        )
        watch.run_once()
        assert all(key[1] != str(pid) for key in watch._warned)
    finally:
        app.close()


def test_sqlite_has_no_horizon(sqlite_url: str) -> None:
    app = rota.App(sqlite_url)
    app.migrate()
    try:
        assert horizon_holders(app.driver) is None
        assert HorizonWatch(app.driver).run_once().oldest_s is None
        assert "xmin_horizon" not in generate_latest(cluster_registry(app.driver)).decode()
    finally:
        app.close()
