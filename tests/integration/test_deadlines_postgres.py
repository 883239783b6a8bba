"""A worker's PostgreSQL connections carry the deadlines derived from its lease (#21):
keepalives, tcp_user_timeout and connect_timeout on the client, statement_timeout on the
server; what the URL says itself wins, and a process without a worker gets no statement
timeout."""

from __future__ import annotations

from urllib.parse import quote

import pytest

import rota
from rota.drivers.postgres.driver import PostgresDriver
from tests.helpers import fast_settings

pytestmark = [pytest.mark.postgres]


def _session(app: rota.App) -> tuple[dict[str, str], str]:
    driver = app.driver
    assert isinstance(driver, PostgresDriver)
    with driver._pg.connection() as conn:
        row = conn.execute("SHOW statement_timeout").fetchone()
        assert row is not None
        return dict(conn.info.get_parameters()), str(next(iter(row.values())))


def test_a_workers_connections_have_its_deadlines(pg_url: str) -> None:
    with rota.App(pg_url) as app:
        app.migrate()
        params, timeout = _session(app)
        assert timeout == "0" and params["connect_timeout"] == "10"  # no worker yet
        rota.Worker(app, fast_settings(lease=30.0, heartbeat=10.0))
        params, timeout = _session(app)
    assert timeout == "10s"
    assert params["keepalives_idle"] == "4" and params["keepalives_count"] == "3"
    assert params["tcp_user_timeout"] == "10000" and params["connect_timeout"] == "10"


def test_the_urls_own_settings_win(pg_url: str) -> None:
    # The test's schema rides in options too: keep it beside the user's timeout.
    schema = pg_url.rsplit("search_path%3D", 1)[-1]
    url = f"{pg_url.split('?', maxsplit=1)[0]}?keepalives_idle=9&options=" + quote(
        f"-csearch_path={schema} -c statement_timeout=0"
    )
    with rota.App(url) as app:
        app.migrate()
        rota.Worker(app, fast_settings(lease=30.0, heartbeat=10.0))
        params, timeout = _session(app)
    assert timeout == "0" and params["keepalives_idle"] == "9"
    assert params["tcp_user_timeout"] == "10000"
