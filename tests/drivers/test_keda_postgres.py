"""PostgreSQL's KEDA functions (migration 0004_keda): the query `rota k8s render` puts in
the ScaledObject returns the right backlog; a role with only the grants of
docs/kubernetes.md can call it and read nothing else; the plans are index-only on a
table with many rows; and the functions ignore the caller's search_path."""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from psycopg import sql

import rota
from rota.k8s import RenderSettings, Signal, WorkerGroup, documents, keda_query
from tests.conftest import PG_URL
from tests.drivers.plans import log_plans
from tests.drivers.test_keda_signals import populate

pytestmark = pytest.mark.postgres

DOCS = Path(__file__).parents[2] / "docs" / "kubernetes.md"


@pytest.fixture
def pg_app(pg_url: str) -> Iterator[rota.App]:
    app = rota.App(pg_url)
    app.migrate()
    try:
        yield app
    finally:
        app.close()


def schema_of(pg_url: str) -> str:
    options = parse_qs(urlsplit(pg_url).query)["options"][0]
    return options.removeprefix("-csearch_path=")


def scalar(conn: psycopg.Connection[tuple[object, ...]], query: str) -> object:
    found = conn.execute(query.encode()).fetchone()
    assert found is not None
    return found[0]


def test_the_rendered_keda_query_returns_the_backlog(pg_app: rota.App, pg_url: str) -> None:
    started = pg_app.driver.db_now()
    populate(pg_app)
    # A queue whose one job was due an hour ago: its age is known to the second.
    pg_app.driver.job_insert_many(
        [rota.drivers.base.JobInsert("t", "aged", "{}", 0, 3, at=started - timedelta(hours=1))]
    )
    settings = RenderSettings(app="shop.jobs:app", groups=(WorkerGroup({"q": 4, "other": 1}),))
    scaled = next(d for d in documents(settings) if d["kind"] == "ScaledObject")
    queries = {t["name"]: t["metadata"]["query"] for t in scaled["spec"]["triggers"]}
    with psycopg.connect(pg_url) as conn:
        # Exactly the text KEDA will send: runnable + running (demand) by default.
        assert scalar(conn, queries["queue-q"]) == 7
        assert scalar(conn, queries["queue-other"]) == 1
        assert scalar(conn, keda_query("q", Signal.BACKLOG)) == 5
        assert scalar(conn, keda_query("no-such-queue")) == 0
        since = (pg_app.driver.db_now() - started).total_seconds()
        # Every job of q was inserted after `started`; the aged one an hour before it.
        assert 0 <= scalar(conn, "SELECT rota_keda_oldest_age('q')") <= since  # type: ignore[operator]
        aged = scalar(conn, "SELECT rota_keda_oldest_age('aged')")
        assert 3600 <= aged <= 3600 + since + 0.01  # type: ignore[operator]


def grant_sql() -> str:
    """The role set-up docs/kubernetes.md tells administrators to run: a NOLOGIN group role,
    as `rota db roles` makes it (docs/security.md), and a login role in it."""
    blocks = re.findall(r"^```sql\n(.*?)^```", DOCS.read_text(), flags=re.DOTALL | re.M)
    found = [b for b in blocks if "GRANT EXECUTE ON FUNCTION" in b]
    assert len(found) == 1, "docs/kubernetes.md must show the rota_metrics grants once"
    return found[0]


def test_a_role_with_only_the_documented_grants_reads_counts_only(
    pg_app: rota.App, pg_url: str
) -> None:
    populate(pg_app)
    schema = schema_of(pg_url)
    role = f"rota_metrics_{uuid.uuid4().hex[:10]}"
    login = f"keda_reader_{uuid.uuid4().hex[:10]}"  # the role KEDA logs in as, in `role`
    outsider = f"rota_outsider_{uuid.uuid4().hex[:10]}"
    setup = (
        grant_sql()
        .replace("rota_metrics", role)
        .replace("keda_reader", login)
        .replace("SCHEMA public", f'SCHEMA "{schema}"')
    )
    with psycopg.connect(pg_url, autocommit=True) as admin:
        try:
            admin.execute(setup.encode())
            admin.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(outsider)))
            admin.execute(
                sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                    sql.Identifier(schema), sql.Identifier(outsider)
                )
            )
            with psycopg.connect(pg_url, autocommit=True) as conn:
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(role)))
                assert scalar(conn, keda_query("q")) == 7
                assert scalar(conn, "SELECT rota_keda_oldest_age('q')") is not None
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("SELECT count(*) FROM rota_jobs")
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute("SELECT args FROM rota_jobs LIMIT 1")
                conn.execute(sql.SQL("SET ROLE {}").format(sql.Identifier(outsider)))
                # EXECUTE is revoked from PUBLIC: no grant, no counts.
                with pytest.raises(psycopg.errors.InsufficientPrivilege):
                    conn.execute(keda_query("q").encode())
            # The metrics server (`rota k8s metrics-api`) logs in as that role: its read
            # path, the driver's queue_backlog, needs nothing more.
            metrics_url = pg_url.replace("postgres@", f"{login}:change-me@", 1)
            assert metrics_url != pg_url
            with rota.App(metrics_url) as metrics_app:
                report = metrics_app.driver.queue_backlog("q")
            assert (report.backlog, report.running) == (5, 2)
        finally:
            for name in (login, role, outsider):
                if _exists(admin, name):
                    admin.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(name)))
                    admin.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def _exists(conn: psycopg.Connection[tuple[object, ...]], role: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None


def test_the_functions_ignore_the_callers_search_path(pg_app: rota.App, pg_url: str) -> None:
    populate(pg_app)
    schema = schema_of(pg_url)
    with psycopg.connect(PG_URL, autocommit=True) as conn:  # search_path: "$user", public
        conn.execute("SET search_path = pg_catalog")
        found = conn.execute(
            sql.SQL("SELECT {}.rota_keda_backlog('q'), {}.rota_keda_running('q')").format(
                sql.Identifier(schema), sql.Identifier(schema)
            )
        ).fetchone()
    assert found == (5, 2)


def test_the_counts_are_index_only_on_a_big_table(pg_app: rota.App, pg_url: str) -> None:
    """200k rows, mostly finished: every count inside the functions reads an index only
    (no Seq Scan, no heap fetch once vacuumed). Plans come from auto_explain, which also
    logs the statements nested in a function."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, state, max_attempts, run_at, finished_at,
                                   lease_token, attempted_at)
            SELECT 't', CASE WHEN i % 5 = 0 THEN 'other' ELSE 'q' END, s.state, 3,
                   now() + CASE WHEN s.state = 'retryable' AND i % 2 = 0
                                THEN interval '1 hour' ELSE -interval '1 minute' END,
                   CASE WHEN s.state = 'completed' THEN now() END,
                   CASE WHEN s.state = 'running' THEN gen_random_uuid() END,
                   CASE WHEN s.state IN ('running', 'completed') THEN now() END
            FROM generate_series(1, 200000) AS i,
                 LATERAL (SELECT CASE WHEN i % 100 < 94 THEN 'completed'
                                      WHEN i % 100 < 97 THEN 'available'
                                      WHEN i % 100 < 99 THEN 'retryable'
                                      ELSE 'running' END AS state) AS s
            """
        )
        # The plan assumes a vacuumed table whose pages are all visible: an open transaction
        # of another session in this database (a test running beside this one) holds that
        # back, so vacuum until it is over.
        deadline = time.monotonic() + 60
        while True:
            conn.execute("VACUUM (ANALYZE) rota_jobs")
            pages, visible = conn.execute(
                "SELECT relpages, relallvisible FROM pg_class WHERE oid = 'rota_jobs'::regclass"
            ).fetchone()  # type: ignore[misc]
            if visible >= pages:
                break
            assert time.monotonic() < deadline, f"only {visible} of {pages} pages all-visible"
            time.sleep(0.2)
        plans: list[str] = []
        log_plans(conn, plans)
        backlog, running = conn.execute(
            "SELECT rota_keda_backlog('q'), rota_keda_running('q')"
        ).fetchone()  # type: ignore[misc]
        conn.execute("SELECT rota_keda_oldest_age('q')")
    # i % 100 in [94, 97): available; [97, 99): retryable, half of them due; 99: running.
    expected = {
        "available": sum(1 for i in range(1, 200_001) if i % 5 and 94 <= i % 100 < 97),
        "due": sum(1 for i in range(1, 200_001) if i % 5 and 97 <= i % 100 < 99 and i % 2),
        "running": sum(1 for i in range(1, 200_001) if i % 5 and i % 100 == 99),
    }
    assert backlog == expected["available"] + expected["due"]
    assert running == expected["running"]
    nested = [p for p in plans if "rota_jobs" in p and "Query Text: SELECT rota_keda" not in p]
    assert len(nested) >= 3, plans
    for plan in nested:
        # (rota_queues, a handful of rows, may be read any way the planner likes.)
        assert "Seq Scan on rota_jobs" not in plan, plan
        assert "Bitmap Heap Scan on rota_jobs" not in plan, plan
        assert "Index Only Scan" in plan and "Index Scan using rota_jobs" not in plan, plan
        assert all(n == "0" for n in re.findall(r"Heap Fetches: (\d+)", plan)), plan


def test_the_oldest_age_reads_one_entry_per_priority_not_the_backlog(
    pg_app: rota.App, pg_url: str
) -> None:
    """rota_keda_oldest_age beside 60,000 waiting jobs of three priorities (migration
    0020): the age of the oldest of them, whatever its priority, found by reading the
    head of each priority in the claim index. min(run_at) over the queue read all 60,000
    index entries on every scrape."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        # The oldest job has the highest priority number (claimed last): a read that
        # stopped at the first priority's head would answer a younger age.
        conn.execute(
            """
            INSERT INTO rota_jobs (task, queue, max_attempts, priority, run_at)
            SELECT 't', 'q', 3, i % 3, now() - make_interval(secs => i % 3 * 1000 + i % 500)
            FROM generate_series(1, 60000) AS i
            """
        )
        conn.execute("INSERT INTO rota_jobs (task, queue, max_attempts) VALUES ('t', 'other', 3)")
        conn.execute("VACUUM (ANALYZE) rota_jobs")
        plans: list[str] = []
        log_plans(conn, plans)
        age = scalar(conn, "SELECT rota_keda_oldest_age('q')")
    assert isinstance(age, float) and 2499 <= age < 2499 + 60
    nested = [p for p in plans if "rota_jobs" in p and "Query Text: SELECT rota_keda" not in p]
    assert nested, plans
    read = sum(
        int(rows) * int(loops)
        for plan in nested
        for rows, loops in re.findall(r"actual time=\S+ rows=(\d+) loops=(\d+)", plan)
    )
    assert read < 50, plans
