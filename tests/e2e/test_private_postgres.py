"""Against a private PostgreSQL server started for this module (TLS on, scram passwords,
a client certificate): TLS settings from the URL or libpq's PG* environment, and a real
worker process that picks up a rotated password from its URL file on reconnect without
losing or doubling a job. Secrets never show in output, errors or logs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner

import rota
from rota.cli.main import cli
from rota.drivers.url import from_file
from tests import private_postgres
from tests.conftest import REQUIRE_PG
from tests.helpers import wait_for

pytestmark = pytest.mark.e2e
APPS = Path(__file__).parent / "apps"


@pytest.fixture(scope="module")
def server() -> Iterator[private_postgres.PrivatePostgres]:
    if private_postgres.find_bin() is None:
        message = (
            "initdb/pg_ctl not found: install PostgreSQL server binaries or set ROTA_TEST_PG_BIN"
        )
        if REQUIRE_PG:
            pytest.fail(message + " (ROTA_REQUIRE_POSTGRES is set: CI must not skip)")
        pytest.skip(message)
    instance = private_postgres.start()
    try:
        yield instance
    finally:
        instance.stop()


def _ssl_in_use(app: rota.App) -> bool:
    with app.transaction() as conn:
        row = conn.execute("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()").fetchone()
    return bool(row and row["ssl"])


def test_tls_verify_full_from_the_url(server: private_postgres.PrivatePostgres) -> None:
    url = server.url(host="localhost", sslmode="verify-full", sslrootcert=str(server.certs["ca"]))
    with rota.App(url) as app:
        app.migrate()
        assert _ssl_in_use(app)
        app.close()


def test_tls_settings_from_the_pg_environment(
    server: private_postgres.PrivatePostgres, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PGSSLMODE", "verify-full")
    monkeypatch.setenv("PGSSLROOTCERT", str(server.certs["ca"]))
    with rota.App(server.url(host="localhost")) as app:
        assert _ssl_in_use(app)


def test_client_certificate_authentication(server: private_postgres.PrivatePostgres) -> None:
    url = server.url(
        private_postgres.CERT_USER,
        None,  # no password: the certificate is the credential
        host="localhost",
        sslmode="verify-full",
        sslrootcert=str(server.certs["ca"]),
        sslcert=str(server.certs["client"]),
        sslkey=str(server.certs["client_key"]),
    )
    with rota.App(url) as app:
        with app.transaction() as conn:
            user = conn.execute("SELECT current_user AS u").fetchone()
        assert user == {"u": private_postgres.CERT_USER}
        assert _ssl_in_use(app)


def test_the_server_refuses_plain_and_unverified_connections(
    server: private_postgres.PrivatePostgres, tmp_path: Path
) -> None:
    with pytest.raises(psycopg.OperationalError, match=r"reject|no encryption"):
        psycopg.connect(server.url(sslmode="disable"), connect_timeout=5)
    other_ca = private_postgres.make_certificates(tmp_path)["ca"]
    with pytest.raises(
        psycopg.OperationalError, match=r"certificate verify failed|signature failure"
    ):
        psycopg.connect(
            server.url(host="localhost", sslmode="verify-full", sslrootcert=str(other_ca)),
            connect_timeout=5,
        )


def test_passwords_never_show_in_cli_output_errors_or_logs(
    server: private_postgres.PrivatePostgres, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Sup3r-Secret-pw"
    url = server.url("nobody", secret, sslmode="require", connect_timeout="2")
    runner = CliRunner()
    result = runner.invoke(cli, ["migrate", "--check", "--database-url", url])
    assert result.exit_code != 0
    assert secret not in result.output and "***" in result.output
    app = rota.App(url)
    assert secret not in repr(app) and secret not in repr(app.url)
    app.close()
    bad = url.replace(f":{server.port}", ":")  # an empty port: refused while parsing
    with pytest.raises(rota.ConfigurationError) as parsed:
        rota.App(bad)
    assert secret not in str(parsed.value)
    query_url = server.url("nobody", None, sslmode="require") + f"&password={secret}"
    assert secret not in rota.App(query_url).url.redacted()
    # A URL file that is wrong says which file, never what is in it.
    url_file = tmp_path / "url"
    url_file.write_text(url.replace("postgresql", "postgrex"))
    result = runner.invoke(cli, ["jobs", "ls", "--database-url-file", str(url_file)])
    assert result.exit_code != 0 and secret not in result.output
    assert all(secret not in r.getMessage() for r in caplog.records)


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def test_worker_picks_up_a_rotated_password_from_its_url_file(
    server: private_postgres.PrivatePostgres, tmp_path: Path
) -> None:
    user, old, new = "rota_rotating", "first-Pw-1", "second-Pw-2"
    with server.admin() as conn:
        conn.execute("DROP SCHEMA IF EXISTS rot CASCADE")
        conn.execute(f"DROP ROLE IF EXISTS {user}")
        conn.execute(f"CREATE ROLE {user} LOGIN PASSWORD '{old}'")
        conn.execute(f"CREATE SCHEMA rot AUTHORIZATION {user}")
    options = {"sslmode": "require", "options": "-csearch_path=rot"}
    url_file = tmp_path / "secret" / "database-url"
    url_file.parent.mkdir()
    url_file.write_text(server.url(user, old, **options) + "\n")

    app = rota.App(from_file(url_file))
    app.migrate()
    effects = tmp_path / "effects"
    effects.touch()
    effect = app.task(name="effect", max_attempts=50)(lambda ctx, n: n)
    jobs = effect.enqueue_many([{"n": i} for i in range(200)])
    app.close()

    env = dict(os.environ)
    env.pop("ROTA_DATABASE_URL", None)
    env.update(
        ROTA_DATABASE_URL_FILE=str(url_file),
        HARDENING_EFFECTS=str(effects),
        PYTHONPATH=os.pathsep.join(p for p in (str(APPS), env.get("PYTHONPATH", "")) if p),
    )
    log_path = tmp_path / "worker.log"
    argv = [
        sys.executable,
        "-m",
        "rota",
        "worker",
        "--app",
        "hardening_app:app",
        "--queues",
        "default=4",
        "--lease",
        "2",
        "--heartbeat",
        "0.3",
        "--poll-interval",
        "0.1",
        "--log-format",
        "json",
    ]
    with log_path.open("wb") as log:
        proc = subprocess.Popen(
            argv,
            env=env,
            cwd=tmp_path,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:

        def lines() -> list[str]:
            return effects.read_text().splitlines()

        wait_for(lambda: len(lines()) >= 20 or proc.poll() is not None, timeout=30)
        assert proc.poll() is None, log_path.read_text()
        # Rotate: the new password in the database and in the file (as a Secret update
        # swaps the mounted file), then cut every connection of the worker.
        with server.admin() as conn:
            conn.execute(f"ALTER ROLE {user} PASSWORD '{new}'")
        staged = url_file.with_suffix(".new")
        staged.write_text(server.url(user, new, **options) + "\n")
        staged.replace(url_file)
        with server.admin() as conn:
            killed = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = %s",
                (user,),
            ).fetchall()
        assert killed, "the worker had no connection to cut"
        with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
            psycopg.connect(server.url(user, old, **options), connect_timeout=5)
        done_before = len(lines())

        checker = rota.App(from_file(url_file))
        try:

            def all_completed() -> bool:
                found = checker.list_jobs(state="completed", limit=1000)
                return len(found) == len(jobs)

            wait_for(all_completed, timeout=60)
            assert len(lines()) > done_before  # work went on after the rotation
            completed = {j.id: j for j in checker.list_jobs(limit=1000)}
        finally:
            checker.close()
        counts = Counter(int(line.split()[0]) for line in lines())
        # Every job ran exactly once: none lost, none doubled by the reconnect.
        assert sorted(counts) == list(range(200)) and set(counts.values()) == {1}
        assert all(j.state is rota.JobState.COMPLETED for j in completed.values())
        proc.send_signal(signal.SIGTERM)
        assert _wait_exit(proc, 30) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    output = log_path.read_text()
    assert old not in output and new not in output, output
