"""`rota db roles` on the real PostgreSQL server: each capability's role does its job
(a real worker runs under the worker role, producers enqueue under the enqueue role),
and what a role was not granted is refused by the database itself."""

from __future__ import annotations

import asyncio
import json
import logging
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from click.testing import CliRunner
from starlette.testclient import TestClient

import rota
from rota.cli.main import cli
from rota.web.records import JobSearch
from rota.web.server import create_app
from rota.web.settings import WebSettings
from rota.web.store import WebStore
from tests.conftest import PG_URL
from tests.helpers import fast_settings, run_worker_until

CAPABILITIES = ("enqueue", "worker", "deadletters", "replay", "metrics")


@dataclass
class Roles:
    admin_url: str
    prefix: str
    urls: dict[str, str]  # capability -> URL of a login role that is a member of it


def _as_user(url: str, user: str) -> str:
    parts = urlsplit(url)
    host = parts.netloc.rpartition("@")[2]
    return parts._replace(netloc=f"{user}@{host}").geturl()


@pytest.fixture
def roles(pg_url: str) -> Iterator[Roles]:
    """rota's schema, the five roles (unique names) and a login member of each; every
    role is dropped afterwards (roles are cluster-wide, the schema is per test)."""
    admin = rota.App(pg_url)
    admin.migrate()
    admin.close()
    prefix = f"rt{uuid.uuid4().hex[:10]}"
    result = CliRunner().invoke(
        cli, ["db", "roles", "--apply", "--prefix", prefix, "--database-url", pg_url]
    )
    assert result.exit_code == 0, result.output
    logins = {cap: f"{prefix}_{cap}_login" for cap in CAPABILITIES}
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for cap, login in logins.items():
            conn.execute(f'CREATE ROLE "{login}" LOGIN IN ROLE "{prefix}_{cap}"')
    try:
        yield Roles(pg_url, prefix, {c: _as_user(pg_url, u) for c, u in logins.items()})
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for cap, login in logins.items():
                for name in (login, f"{prefix}_{cap}"):
                    conn.execute(f'DROP OWNED BY "{name}"')
                    conn.execute(f'DROP ROLE IF EXISTS "{name}"')


def _register(app: rota.App) -> dict[str, rota.Task[..., object]]:
    @app.task(name="bill", max_attempts=1)
    def bill(ctx: rota.Context, order: int) -> int:
        ctx.progress(0.5, "half")
        ctx.checkpoint({"order": order})
        charged: int = ctx.step("charge", lambda: order * 10)
        if order < 0:
            raise rota.Discard("negative order")
        return charged

    return {"bill": bill}


def _refused(url: str, statement: str) -> str:
    with (
        psycopg.connect(url, autocommit=True) as conn,
        pytest.raises(psycopg.errors.InsufficientPrivilege) as info,
    ):
        conn.execute(statement)  # type: ignore[arg-type]
    return str(info.value)


def test_producer_and_worker_run_under_their_roles(
    roles: Roles, caplog: pytest.LogCaptureFixture
) -> None:
    producer = rota.App(roles.urls["enqueue"])
    worker_app = rota.App(roles.urls["worker"])
    try:
        bill = _register(producer)["bill"]
        _register(worker_app)
        with worker_app.transaction() as conn:  # really connected as the login member
            user = conn.execute("SELECT current_user").fetchone()
        assert user == {"current_user": f"{roles.prefix}_worker_login"}
        jobs = [bill.enqueue(order=i, key=f"order-{i}") for i in range(5)]
        again = bill.enqueue(order=0, key="order-0")  # the key path works too
        assert not again.created and again.id == jobs[0].id
        bad = bill.enqueue(order=-1)
        with producer.transaction() as conn:  # in the producer's own transaction
            in_tx = bill.enqueue(order=9, conn=conn)
        ids = [j.id for j in [*jobs, bad, in_tx]]
        worker = rota.Worker(worker_app, fast_settings(prune_interval=0.2))
        with caplog.at_level(logging.WARNING):
            asyncio.run(
                run_worker_until(
                    worker,
                    lambda: (
                        all((j := worker_app.get_job(i)) and j.state.finished for i in ids)
                        and worker.elector.is_leader
                    ),
                )
            )
        # Every part of the worker, maintenance included, had the privileges it needed.
        assert not [r.getMessage() for r in caplog.records if "denied" in r.getMessage()]
        states = {j.id: j.state for j in worker_app.list_jobs()}
        assert [states[j.id] for j in jobs] == [rota.JobState.COMPLETED] * 5
        assert states[bad.id] is rota.JobState.DISCARDED
        done = worker_app.get_job(jobs[3].id)
        assert done is not None and done.result == 30 and done.progress == 0.5
        # A producer may wait for its jobs: flagging one `awaited` is all it changes.
        assert producer.wait(jobs[3], timeout=10) == 30
        with pytest.raises(rota.JobFailedError):
            producer.wait(bad.id, timeout=10)

        # The enqueue role cannot finish, fail or steal a job: the database refuses.
        with pytest.raises(rota.PermissionDeniedError, match="permission denied"):
            producer.retry_job(bad.id)
        message = _refused(roles.urls["enqueue"], "UPDATE rota_jobs SET state = 'completed'")
        assert "permission denied" in message
        _refused(roles.urls["enqueue"], "DELETE FROM rota_jobs")
        _refused(roles.urls["enqueue"], "SELECT * FROM rota_api_tokens")
        _refused(roles.urls["enqueue"], "SELECT * FROM rota_steps")
        # The worker role cannot mint API tokens or rewrite the migrations ledger.
        _refused(roles.urls["worker"], "SELECT * FROM rota_api_tokens")
        _refused(roles.urls["worker"], "DELETE FROM rota_migrations")
    finally:
        producer.close()
        worker_app.close()


def test_dead_letters_replay_and_metrics_roles(roles: Roles) -> None:
    admin = rota.App(roles.admin_url)
    reader = rota.App(roles.urls["deadletters"])
    replayer = rota.App(roles.urls["replay"])
    metrics = rota.App(roles.urls["metrics"])
    try:
        bill = _register(admin)["bill"]
        job = bill.enqueue(order=7)
        claimed = admin.driver.job_claim(job.id, "w", 30)
        assert claimed is not None and claimed.lease_token
        entry = json.dumps({"outcome": "discarded", "message": "card declined"})
        admin.driver.job_complete_many(
            [
                rota.drivers.base.Completion(
                    job.id, claimed.lease_token, rota.JobState.DISCARDED, entry
                )
            ]
        )
        # Dead letters: readable with their history, not changeable. The dashboard's
        # reads and `rota dlq ls` work under this read-only role.
        (dead,) = reader.list_jobs(state="discarded")
        assert dead.history[-1].message == "card declined"
        assert [j.id for j in reader.dlq.list()] == [job.id]
        assert [j.id for j in WebStore(reader.driver).job_search(JobSearch(q="bill"))] == [job.id]
        WebStore(reader.driver).leader_list()
        WebStore(reader.driver).queue_series(3600.0, 60.0)
        with pytest.raises(rota.PermissionDeniedError):
            reader.retry_job(job.id)
        with pytest.raises(rota.PermissionDeniedError):
            reader.dlq.replay(reason="not mine to do", ids=[job.id])
        _refused(roles.urls["deadletters"], "DELETE FROM rota_api_tokens")
        _refused(roles.urls["deadletters"], "UPDATE rota_api_tokens SET role = 'admin'")
        # Replay: may put it back in the queue (audited), and change nothing else.
        report = replayer.dlq.replay(reason="card processor fixed", ids=[job.id])
        assert report.count == 1 and report.replay_id is not None
        assert replayer.get_job(job.id).state is rota.JobState.AVAILABLE  # type: ignore[union-attr]
        _refused(roles.urls["replay"], "DELETE FROM rota_jobs")
        _refused(roles.urls["replay"], "UPDATE rota_jobs SET result = '1'::jsonb")
        _refused(roles.urls["replay"], "UPDATE rota_jobs SET lease_token = gen_random_uuid()")
        _refused(
            roles.urls["replay"],
            "INSERT INTO rota_jobs (task, queue, max_attempts) VALUES ('x', 'default', 1)",
        )
        # Metrics: counts, times and KEDA's signals; never arguments, results or errors.
        (queue,) = metrics.list_queues()
        assert queue.counts == {"available": 1}
        assert metrics.driver.queue_backlog("default").backlog == 1
        for column in ("args", "result", "history", "key", "lease_token"):
            _refused(roles.urls["metrics"], f"SELECT {column} FROM rota_jobs")
        _refused(roles.urls["metrics"], "SELECT digest FROM rota_api_tokens")
        _refused(roles.urls["metrics"], "UPDATE rota_jobs SET priority = 1")
        _refused(roles.urls["metrics"], "SELECT * FROM rota_steps")
        # `rota metrics` (the cluster collector Prometheus scrapes) runs under it.
        scraped = CliRunner().invoke(
            cli, ["metrics", "--once", "--database-url", roles.urls["metrics"]]
        )
        assert scraped.exit_code == 0, scraped.output
        assert "rota_" in scraped.output
        # The replay role (the dashboard's) may also cancel in bulk, with its audit record.
        cancelled = replayer.jobs.cancel(ids=[job.id], reason="customer left")
        assert cancelled.count == 1 and replayer.jobs.audit()[0].count == 1
    finally:
        for app in (admin, reader, replayer, metrics):
            app.close()


def test_roles_are_printed_rerun_safely_and_checked(roles: Roles) -> None:
    runner = CliRunner()
    args = ["db", "roles", "--prefix", roles.prefix, "--database-url", roles.admin_url]
    printed = runner.invoke(cli, args)
    assert printed.exit_code == 0, printed.output
    assert "GRANT INSERT ON TABLE" in printed.output
    assert 'GRANT UPDATE ("key_active", "awaited") ON TABLE' in printed.output
    again = runner.invoke(cli, [*args, "--apply", "--json"])  # idempotent
    assert again.exit_code == 0, again.output
    report = json.loads(again.output)
    assert report["roles"]["metrics"] == f"{roles.prefix}_metrics" and report["applied"]
    bad = runner.invoke(
        cli, ["db", "roles", "--prefix", "Robert'); DROP", "--database-url", roles.admin_url]
    )
    assert bad.exit_code == 2 and "bad role prefix" in bad.output


def test_roles_refused_on_sqlite(sqlite_url: str) -> None:
    rota.App(sqlite_url).migrate()
    result = CliRunner().invoke(cli, ["db", "roles", "--database-url", sqlite_url])
    assert result.exit_code == 1 and "PostgreSQL feature" in result.output


def test_the_dashboard_runs_read_only_under_the_deadletters_role(roles: Roles) -> None:
    admin = rota.App(roles.admin_url)
    viewer_app = rota.App(roles.urls["deadletters"])
    try:
        bill = _register(admin)["bill"]
        job = bill.enqueue(order=3)
        token = admin.tokens.create("ops", "admin")  # tokens are made by the administrator
        headers = {"Authorization": f"Bearer {token}"}
        web = create_app(viewer_app, WebSettings(allowed_hosts=("testserver",)))
        with TestClient(web) as client:
            listed = client.get("/api/jobs", headers=headers)
            assert listed.status_code == 200, listed.text
            assert [j["id"] for j in listed.json()] == [job.id]
            assert client.get(f"/api/jobs/{job.id}", headers=headers).status_code == 200
            # The API token would allow it; the database role does not.
            refused = client.post(f"/api/jobs/{job.id}/cancel", headers=headers)
            assert refused.status_code == 403, refused.text
            assert "permission denied" in refused.text
        current = admin.get_job(job.id)
        assert current is not None and current.state is rota.JobState.AVAILABLE
    finally:
        admin.close()
        viewer_app.close()


def _privileges(role: str, table: str) -> set[str]:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        row = conn.execute(
            "SELECT array_agg(privilege_type::text) FROM information_schema.role_table_grants "
            "WHERE grantee = %s AND table_name = %s",
            (role, table),
        ).fetchone()
    return set(row[0] or []) if row else set()


def test_an_existing_role_is_neither_adopted_nor_stripped(pg_url: str) -> None:
    """Issue 18, hole 7: `--prefix app` must not take over an application's own
    `app_worker` and revoke its grants on the application's tables."""
    admin = rota.App(pg_url)
    admin.migrate()
    admin.close()
    prefix = f"app{uuid.uuid4().hex[:8]}"
    theirs = f"{prefix}_worker"
    schema = parse_qs(urlsplit(pg_url).query)["options"][0].split("=", 1)[1]
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'CREATE TABLE "{schema}".orders (id int)')
        conn.execute(f'CREATE ROLE "{theirs}" NOLOGIN')
        conn.execute(f'GRANT SELECT, INSERT ON "{schema}".orders TO "{theirs}"')
    runner = CliRunner()
    args = ["db", "roles", "--apply", "--prefix", prefix, "--database-url", pg_url]
    try:
        refused = runner.invoke(cli, args)
        assert refused.exit_code == 1, refused.output
        assert theirs in refused.output and "--adopt" in refused.output
        assert _privileges(theirs, "orders") == {"SELECT", "INSERT"}
        assert _privileges(theirs, "rota_jobs") == set()  # nothing changed at all
        printed = runner.invoke(cli, [*args[:2], "--prefix", prefix, "--database-url", pg_url])
        assert printed.exit_code == 1  # the plan is not even printed as if it would apply
        adopted = runner.invoke(cli, [*args, "--adopt"])
        assert adopted.exit_code == 0, adopted.output
        # rota manages it now, and never revoked what it does not own.
        assert _privileges(theirs, "orders") == {"SELECT", "INSERT"}
        assert {"SELECT", "INSERT", "UPDATE", "DELETE"} <= _privileges(theirs, "rota_jobs")
        again = runner.invoke(cli, args)  # marked as rota's now: no --adopt needed
        assert again.exit_code == 0, again.output
        assert _privileges(theirs, "orders") == {"SELECT", "INSERT"}
        statements = json.loads(runner.invoke(cli, [*args, "--json"]).stdout)["statements"]
        assert not [s for s in statements if "ALL TABLES IN SCHEMA" in s]
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for cap in CAPABILITIES:
                name = f"{prefix}_{cap}"
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (name,)).fetchone():
                    conn.execute(f'DROP OWNED BY "{name}"')
                    conn.execute(f'DROP ROLE "{name}"')


def test_the_dashboard_role_keeps_sessions_and_last_use(roles: Roles) -> None:
    """The read-only dashboard role opens and ends browser sessions and records when a
    token was last used; the worker and metrics roles cannot read sessions at all."""
    admin = rota.App(roles.admin_url)
    reader = rota.App(roles.urls["deadletters"])
    try:
        token = admin.tokens.create("web", "viewer")
        secret, principal = reader.tokens.start_session(token, 60)
        assert principal.name == "web" and reader.tokens.session(secret).name == "web"
        assert reader.tokens.end_session(secret)
        assert next(t for t in admin.tokens.list() if t.name == "web").last_used_at is not None
        for cap in ("worker", "metrics", "enqueue"):
            _refused(roles.urls[cap], "SELECT * FROM rota_sessions")
            _refused(roles.urls[cap], "SELECT * FROM rota_login_links")
        _refused(roles.urls["deadletters"], "UPDATE rota_api_tokens SET role = 'admin'")
    finally:
        admin.close()
        reader.close()


def test_kubernetes_keda_login_joins_the_metrics_role_rota_db_roles_made(roles: Roles) -> None:
    """docs/kubernetes.md after docs/security.md (#19): `rota db roles --apply` made the
    NOLOGIN metrics role; the page's last statement adds the login KEDA uses, and that
    login reads the counts, and nothing else."""
    import re
    from pathlib import Path

    page = (Path(__file__).parents[2] / "docs" / "kubernetes.md").read_text()
    blocks = re.findall(r"^```sql\n(.*?)^```", page, re.S | re.M)
    (block,) = [b for b in blocks if "keda_reader" in b]
    statements = [s.strip() for s in block.split(";") if s.strip()]
    assert statements[0].endswith("CREATE ROLE rota_metrics NOLOGIN")  # as rota db roles
    last = statements[-1]
    assert last.startswith("CREATE ROLE keda_reader LOGIN")
    login = f"{roles.prefix}_keda_reader"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(
            last.replace("keda_reader", login).replace("rota_metrics", f"{roles.prefix}_metrics")
        )
    try:
        url = _as_user(roles.admin_url, f"{login}:change-me")
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute("SELECT rota_keda_backlog('q')").fetchone() == (0,)
        assert "permission denied" in _refused(url, "SELECT args FROM rota_jobs LIMIT 1")
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'DROP ROLE IF EXISTS "{login}"')
