"""Issue 18, tried as an attacker would: a running dashboard (real uvicorn, real HTTP)
answers every route for every role and in both auth modes by the rules in
docs/security.md; forged writes, foreign Host and Origin headers, oversized and deeply
nested bodies and payload leaks to viewers are refused; every answer carries the security
headers. The last tests keep what already held."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

import rota
from rota.drivers.base import JobInsert
from rota.security.encryption import ENV_KEYS, generate_key
from rota.web.features import PAGES
from tests.helpers import wait_for
from tests.web import browser
from tests.web.doors import (
    EVIL,
    ROLES,
    SECRET,
    WRITE_HEADERS,
    Shop,
    bearer,
    dashboard,
    route_cases,
    seed,
)

PROBLEM = "application/problem+json"
JSON = {"Content-Type": "application/json"}


@pytest.fixture
def shop(app: rota.App) -> Shop:
    return seed(app)


@pytest.fixture
def sqlite_shop(sqlite_url: str) -> Iterator[Shop]:
    app = rota.App(sqlite_url)
    app.migrate()
    try:
        yield seed(app)
    finally:
        app.close()


def _pages() -> list[str]:
    values = {"job_id": "1", "name": "nightly", "ref": "thumbnails", "key": "order-42"}
    return [re.sub(r"\{(\w+)(:\w+)?\}", lambda m: values[m[1]], p.path) for p in PAGES]


# --- every route, every role, both modes ---------------------------------------------------


def test_every_route_answers_each_role_by_its_permission(shop: Shop) -> None:
    cases = route_cases()
    extra = [("GET", "/metrics", "read"), ("GET", "/api/openapi.json", "read")]
    with dashboard(shop.app) as client:
        for role in (None, *ROLES):
            headers = {**WRITE_HEADERS, **(bearer(shop.tokens[role]) if role else {})}
            granted = (
                set()
                if role is None
                else {str(p) for p in rota.auth.permissions_of(rota.Role(role))}
            )
            calls = [(c.method, c.path, c.permission, c.body) for c in cases]
            calls += [(m, p, perm, None) for m, p, perm in extra]
            for method, path, permission, body in calls:
                response = client.request(method, path, json=body, headers=headers)
                where = (role, method, path, response.status_code, response.text[:300])
                assert response.status_code < 500, where
                if permission is None:
                    continue  # public: health, and the session endpoints check themselves
                if role is None:
                    assert response.status_code == 401, where
                    assert response.headers["content-type"] == PROBLEM, where
                    assert response.headers["www-authenticate"].startswith("Bearer"), where
                elif permission in granted:
                    assert response.status_code not in (401, 403), where
                else:
                    assert response.status_code == 403, where
                    assert permission in response.json()["detail"], where
                if role is None or "dlq_read" not in granted:
                    # The one rule: no payload (arguments, errors, tracebacks) without
                    # dlq_read, on any route.
                    assert SECRET not in response.text, where


def test_every_page_for_each_role(shop: Shop) -> None:
    with dashboard(shop.app) as client:
        for path in _pages():
            page = client.get(path)
            assert page.status_code == 200 and 'data-page="login"' in page.text, path
        for role in ROLES:
            client.cookies.clear()
            login = client.post(
                "/api/session", json={"token": shop.tokens[role]}, headers=WRITE_HEADERS
            )
            assert login.status_code == 200, login.text
            perms = {str(p) for p in rota.auth.permissions_of(rota.Role(role))}
            for path in _pages():
                page = client.get(path)
                needs = (
                    "admin"
                    if path == "/tokens"
                    else "dlq_read"
                    if path == "/dead-letters"
                    else None
                )
                if needs is None or needs in perms:
                    assert page.status_code == 200, (role, path, page.text[:200])
                    assert 'data-page="login"' not in page.text, (role, path)
                else:
                    assert page.status_code == 403, (role, path)
                    assert needs in page.text
                    assert 'id="new-token"' not in page.text  # no working-looking form
            nav = client.get("/").text
            assert ('href="/tokens"' in nav) is (role == "admin"), role
            assert ('href="/dead-letters"' in nav) is ("dlq_read" in perms), role


def test_every_route_in_no_auth_mode_needs_the_page_header(sqlite_shop: Shop) -> None:
    app = sqlite_shop.app
    with dashboard(app, no_auth=True) as client:
        for case in route_cases():
            forged = client.request(case.method, case.path, json=case.body)
            if case.method in ("GET", "HEAD"):
                assert forged.status_code < 400 or forged.status_code in (404, 409), (
                    case.path,
                    forged.text,
                )
                continue
            # A write without the dashboard's header could come from any web page.
            assert forged.status_code == 403, (case.method, case.path, forged.text)
            assert forged.headers["content-type"] == PROBLEM
            own = client.request(case.method, case.path, json=case.body, headers=WRITE_HEADERS)
            assert own.status_code < 500 and own.status_code != 403, (case.path, own.text)


# --- hole 1: a --no-auth dashboard driven by any website -----------------------------------


def test_no_auth_refuses_cross_site_forms_and_foreign_origins(sqlite_shop: Shop) -> None:
    app = sqlite_shop.app
    before = len(app.list_jobs())
    with dashboard(app, no_auth=True) as client:
        # <form enctype="text/plain" method=post action=".../api/jobs"> from another site.
        form = client.post(
            "/api/jobs",
            content=b'{"task": "shop.email", "args": {"to": "x"}, "pad": "="}',
            headers={"Content-Type": "text/plain", "Origin": EVIL},
        )
        assert form.status_code in (403, 415), form.text
        # Even with the header (a same-site page could send it), a foreign Origin is refused.
        for path in ("/api/queues/mail/pause", f"/api/jobs/{sqlite_shop.dead}/retry"):
            forged = client.post(path, headers={**WRITE_HEADERS, "Origin": EVIL})
            assert forged.status_code == 403, (path, forged.text)
            assert "origin" in forged.json()["detail"].lower()
        cross = client.post(
            "/api/queues/mail/pause", headers={**WRITE_HEADERS, "Sec-Fetch-Site": "cross-site"}
        )
        assert cross.status_code == 403
        # A JSON write needs a JSON body type.
        typed = client.post(
            "/api/jobs",
            content=json.dumps({"task": "shop.email", "args": {"to": "x"}}),
            headers={**WRITE_HEADERS, "Content-Type": "text/plain"},
        )
        assert typed.status_code == 415 and typed.headers["content-type"] == PROBLEM
        assert len(app.list_jobs()) == before
        assert not any(q.paused for q in app.list_queues())
        # The dashboard's own page: same origin, the header, JSON.
        origin = str(client.base_url).rstrip("/")
        own = client.post("/api/queues/mail/pause", headers={**WRITE_HEADERS, "Origin": origin})
        assert own.status_code == 200, own.text


@pytest.mark.parametrize("no_auth", [True, False])
def test_dns_rebinding_a_foreign_host_is_refused(sqlite_shop: Shop, no_auth: bool) -> None:
    token = bearer(sqlite_shop.tokens["admin"])
    with dashboard(sqlite_shop.app, no_auth=no_auth) as client:
        port = client.base_url.port
        for host in ("rebind.attacker.example", f"rebind.attacker.example:{port}", "10.0.0.8"):
            for path in ("/api/jobs", f"/api/jobs/{sqlite_shop.dead}", "/", "/api/health"):
                answer = client.get(path, headers={**token, "Host": host})
                assert answer.status_code == 400, (host, path, answer.text[:200])
                assert SECRET not in answer.text and "--allowed-host" in answer.text
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost"):
            assert client.get("/api/jobs", headers={**token, "Host": host}).status_code == 200


# --- hole 2: a viewer reading dead letters by another route --------------------------------


def test_viewer_sees_no_payload_on_any_route(shop: Shop) -> None:
    viewer, operator = bearer(shop.tokens["viewer"]), bearer(shop.tokens["operator"])
    dead = shop.dead
    with dashboard(shop.app) as client:
        for path in (
            "/api/jobs?state=discarded",
            f"/api/jobs/{dead}",
            f"/api/jobs?id={dead}",
            "/api/batches/thumbnails",
            "/api/workflows/etl-2026-11-28",
            "/api/sagas/order-42",
            "/api/sagas",
            "/api/schedules",
            "/api/schedules/nightly",
        ):
            seen = client.get(path, headers=viewer)
            assert seen.status_code == 200, (path, seen.text)
            assert SECRET not in seen.text and "Traceback" not in seen.text, path
            assert "card declined" not in seen.text and "warehouse" not in seen.text, path
        job = client.get(f"/api/jobs/{dead}", headers=viewer).json()
        assert job["args"] == "<hidden>" and job["payload_hidden"] is True
        assert job["state"] == "discarded" and job["history"][0]["error_type"] == "RuntimeError"
        assert job["history"][0]["message"] is None and job["history"][0]["traceback"] is None
        # Searching the arguments would leak them one guess at a time.
        assert client.get(f"/api/jobs?q={SECRET}", headers=viewer).json() == []
        refused = client.get(f"/api/jobs?text={SECRET}", headers=viewer)
        assert refused.status_code == 403 and "dlq_read" in refused.json()["detail"]
        # id, key and task still find jobs for a viewer.
        assert [j["id"] for j in client.get(f"/api/jobs?q={dead}", headers=viewer).json()] == [dead]
        assert client.get("/api/jobs?q=shop.refund", headers=viewer).json()[0]["id"] == dead
        # An operator (dlq_read) sees everything.
        full = client.get(f"/api/jobs/{dead}", headers=operator).json()
        assert full["args"] == {"card": SECRET} and full["payload_hidden"] is False
        assert SECRET in full["history"][0]["message"] and full["history"][0]["traceback"]
        assert [j["id"] for j in client.get(f"/api/jobs?q={SECRET}", headers=operator).json()] == [
            dead
        ]
        saga = client.get("/api/sagas/order-42", headers=operator).json()
        assert "card declined" in saga["error"]


# --- hole 3: unauthenticated requests that cost memory or crash a handler ------------------


def _raw(port: int, head: str, body: bytes = b"", timeout: float = 20) -> bytes:
    """Send one request as raw bytes; return the status line and headers of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(head.encode() + body)
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = sock.recv(65536)
            if not chunk:
                break
            data += chunk
        return data


def _peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    raise AssertionError("no VmHWM")


@pytest.fixture
def dashboard_process(sqlite_url: str) -> Iterator[tuple[subprocess.Popen[str], int]]:
    with rota.App(sqlite_url) as app:
        app.migrate()
    port = browser.free_port()
    env = {**os.environ, "ROTA_DATABASE_URL": sqlite_url}
    proc = subprocess.Popen(
        [sys.executable, "-m", "rota", "dashboard", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )

    def up() -> bool:
        try:
            return httpx.get(f"http://127.0.0.1:{port}/api/health", timeout=1).is_success
        except httpx.HTTPError:
            return proc.poll() is not None

    try:
        wait_for(up, timeout=30, interval=0.1)
        assert proc.poll() is None
        yield proc, port
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()


def test_a_huge_body_to_the_login_endpoint_is_refused_unread(
    dashboard_process: tuple[subprocess.Popen[str], int],
) -> None:
    proc, port = dashboard_process
    before = _peak_rss_kb(proc.pid)
    size = 50 * 1024 * 1024
    head = (
        f"POST /api/session HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nX-Rota-Request: 1\r\nContent-Length: {size}\r\n\r\n"
    )
    started = time.monotonic()
    answer = _raw(port, head, b'{"token": "' + b"a" * 65536)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert PROBLEM.encode() in answer
    assert time.monotonic() - started < 10
    # Without a length (chunked), the server stops reading at the limit.
    chunked = (
        f"POST /api/session HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Content-Type: application/json\r\nX-Rota-Request: 1\r\n"
        "Transfer-Encoding: chunked\r\n\r\n"
    )
    chunk = b"a" * 1024 * 1024
    body = b"".join(b"%x\r\n%s\r\n" % (len(chunk), chunk) for _ in range(50))
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(chunked.encode())
        try:
            sock.sendall(body)
        except (BrokenPipeError, ConnectionResetError):
            pass  # it stopped listening: what we want
        reply = sock.recv(65536)
    assert reply.startswith(b"HTTP/1.1 413"), reply[:200]
    grown_mb = (_peak_rss_kb(proc.pid) - before) / 1024
    assert grown_mb < 20, f"the dashboard's peak RSS grew by {grown_mb:.0f} MB"


def test_deeply_nested_json_is_a_400_not_a_crash(
    sqlite_shop: Shop, caplog: pytest.LogCaptureFixture
) -> None:
    nested = b"[" * 100_000 + b"]" * 100_000
    small = b"[" * 2_000 + b"]" * 2_000  # under the login endpoint's 4 KiB
    wrapped = b'{"task": "shop.email", "args": {"to": ' + b"[" * 5_000 + b"]" * 5_000 + b"}}"
    admin = bearer(sqlite_shop.tokens["admin"])
    with caplog.at_level(logging.ERROR), dashboard(sqlite_shop.app) as client:
        for path, body, headers in (
            ("/api/session", small, WRITE_HEADERS),
            ("/api/jobs", nested, admin),
            ("/api/jobs", wrapped, admin),
        ):
            answer = client.post(
                path, content=body, headers={**headers, "Content-Type": "application/json"}
            )
            assert answer.status_code == 400, (path, answer.text[:200])
            assert answer.headers["content-type"] == PROBLEM
            assert "nest" in answer.json()["detail"]
    assert not [r for r in caplog.records if "RecursionError" in r.getMessage() + str(r.exc_info)]


def test_json_endpoints_refuse_other_content_types(sqlite_shop: Shop) -> None:
    admin = bearer(sqlite_shop.tokens["admin"])
    body = json.dumps({"task": "shop.email", "args": {"to": "x"}})
    with dashboard(sqlite_shop.app) as client:
        for kind in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
            answer = client.post("/api/jobs", content=body, headers={**admin, "Content-Type": kind})
            assert answer.status_code == 415, (kind, answer.text)
        ok = client.post(
            "/api/jobs",
            content=body,
            headers={**admin, "Content-Type": "application/json; charset=utf-8"},
        )
        assert ok.status_code == 201, ok.text
        # A write without a body needs no content type (curl -X POST .../pause).
        assert client.post("/api/queues/mail/pause", headers=admin).status_code == 200


# --- hole 4: security headers --------------------------------------------------------------


def test_every_answer_carries_the_security_headers(sqlite_shop: Shop) -> None:
    admin = bearer(sqlite_shop.tokens["admin"])
    with dashboard(sqlite_shop.app) as client:
        answers = [
            client.get("/"),  # the login page
            client.get("/jobs", headers=admin),
            client.get("/api/jobs", headers=admin),
            client.get("/api/jobs"),  # a 401 problem
            client.get("/api/health"),
            client.get("/static/app.js"),
            client.get("/nowhere"),
            client.get("/metrics", headers=admin),
            client.get("/api/openapi.json", headers=admin),
            client.post(
                "/api/jobs", content=b"{", headers={**admin, "Content-Type": "application/json"}
            ),
        ]
        for answer in answers:
            where = (answer.request.url.path, answer.status_code)
            csp = answer.headers.get("content-security-policy", "")
            assert "frame-ancestors 'none'" in csp, where
            script = re.search(r"script-src ([^;]*)", csp)
            assert script and "'unsafe-inline'" not in script[1], where
            assert answer.headers.get("x-frame-options") == "DENY", where
            assert answer.headers.get("x-content-type-options") == "nosniff", where
            assert answer.headers.get("referrer-policy") == "same-origin", where
        page = client.get("/jobs", headers=admin).text
        assert "<script>" not in page and "onclick=" not in page  # no inline script to allow


# --- what held before: keep it -------------------------------------------------------------


def test_missing_wrong_and_revoked_tokens_are_401(sqlite_shop: Shop) -> None:
    app = sqlite_shop.app
    with dashboard(app) as client:
        for headers in (
            {},
            bearer("rota_not-a-real-token"),
            {"Authorization": "Basic eDp5"},
            {"Authorization": "Bearer"},
        ):
            answer = client.get("/api/jobs", headers=headers)
            assert answer.status_code == 401 and answer.headers["content-type"] == PROBLEM
        token = app.tokens.create("short-lived", "viewer")
        assert client.get("/api/jobs", headers=bearer(token)).status_code == 200
        app.tokens.revoke("short-lived")
        assert client.get("/api/jobs", headers=bearer(token)).status_code == 401


NASTY = [
    "' OR 1=1 --",
    "'; DROP TABLE rota_jobs; --",
    '" OR ""="',
    "1; SELECT pg_sleep(5)",
    "../../../../etc/passwd",
    "..%2f..%2fetc%2fpasswd",
    "%00",
    "\\x00",
    "${jndi:ldap://x}",
    "{{7*7}}",
    "<script>alert(1)</script>",
    "%' OR '1'='1",
    "a" * 600,
]


def test_injection_and_traversal_strings_get_no_5xx_and_no_leak(sqlite_shop: Shop) -> None:
    admin = bearer(sqlite_shop.tokens["admin"])
    with dashboard(sqlite_shop.app) as client:
        for text in NASTY:
            for path, params in (
                ("/api/jobs", {"q": text}),
                ("/api/jobs", {"task": text, "key": text, "queue": text}),
                ("/api/dead-letters", {"text": text, "error_type": text}),
                (f"/api/schedules/{httpx.URL(text).raw_path.decode()}", {}),
                (f"/api/sagas/{text}", {}),
                (f"/api/batches/{text}", {}),
            ):
                answer = client.get(path, params=params, headers=admin)
                assert answer.status_code < 500, (path, text, answer.text[:200])
                # (A 404 may quote the name asked for; what it must never show is ours.)
                for leak in ("Traceback", "sqlite3.", "psycopg.", "syntax error", "root:x:0"):
                    assert leak not in answer.text, (path, text, leak)
        assert len(sqlite_shop.app.list_jobs()) > 10  # nothing was dropped
        for path in (
            "/static/../server.py",
            "/static/%2e%2e/server.py",
            "/static/..%2fserver.py",
            "/static/%2e%2e%2f%2e%2e%2fpyproject.toml",
            "/static//etc/passwd",
        ):
            answer = client.get(path)
            assert answer.status_code == 404, path
            assert "import" not in answer.text and "root:x:0" not in answer.text


def test_cookie_is_http_only_strict_and_writes_need_the_header(sqlite_shop: Shop) -> None:
    with dashboard(sqlite_shop.app) as client:
        login = client.post(
            "/api/session", json={"token": sqlite_shop.tokens["operator"]}, headers=WRITE_HEADERS
        )
        cookie = login.headers["set-cookie"].lower()
        assert "httponly" in cookie and "samesite=strict" in cookie
        assert sqlite_shop.tokens["operator"].lower() not in cookie  # not the token itself
        assert client.get("/api/queues").status_code == 200
        assert client.post("/api/queues/mail/pause").status_code == 403
        assert client.post("/api/queues/mail/pause", headers=WRITE_HEADERS).status_code == 200


def test_no_cors_headers_are_ever_granted(sqlite_shop: Shop) -> None:
    with dashboard(sqlite_shop.app) as client:
        preflight = client.options(
            "/api/jobs",
            headers={
                "Origin": EVIL,
                "Access-Control-Request-Method": "POST",
                "Access-Control-Request-Headers": "x-rota-request, content-type",
            },
        )
        answer = client.get("/api/health", headers={"Origin": EVIL, "Authorization": "Bearer x"})
        for response in (preflight, answer):
            assert not [h for h in response.headers if h.lower().startswith("access-control-")]


def test_markup_in_errors_and_names_is_escaped(sqlite_shop: Shop) -> None:
    app = sqlite_shop.app
    admin = bearer(sqlite_shop.tokens["admin"])
    with dashboard(app) as client:
        named = client.post(
            "/api/tokens",
            json={"name": "<img src=x onerror=alert(1)>", "role": "viewer"},
            headers=admin,
        )
        assert named.status_code == 422 and named.headers["content-type"] == PROBLEM
        login = client.get("/login?next=%22%3E%3Cscript%3Ealert(1)%3C/script%3E")
        assert "<script>alert(1)" not in login.text
        missing = client.get("/jobs/<script>alert(1)</script>")
        assert "<script>alert(1)" not in missing.text
        # The API answers JSON only, never HTML a browser could run.
        assert client.get("/api/jobs", headers=admin).headers["content-type"] == "application/json"


def test_encrypted_arguments_are_never_shown_searched_or_logged(
    sqlite_shop: Shop, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv(ENV_KEYS, generate_key())
    app = sqlite_shop.app

    @app.task(name="shop.vault", encrypted=True)
    def vault(pin: str) -> None:
        pass

    job = app.enqueue("shop.vault", {"pin": "pin-98765"})
    admin = bearer(sqlite_shop.tokens["admin"])
    with caplog.at_level(logging.DEBUG), dashboard(app) as client:
        shown = client.get(f"/api/jobs/{job.id}", headers=admin).json()
        assert shown["args"] == "<encrypted>" and shown["args_encrypted"] is True
        assert client.get("/api/jobs?q=pin-98765", headers=admin).json() == []
        assert client.get("/api/jobs?text=98765", headers=admin).json() == []
        made = client.post(
            "/api/jobs", json={"task": "shop.vault", "args": {"pin": "pin-11111"}}, headers=admin
        )
        assert made.status_code == 201 and made.json()["args"] == "<encrypted>"
    ours = [r for r in caplog.records if r.name.startswith(("rota", "uvicorn"))]
    assert not [r for r in ours if "pin-" in r.getMessage()]


def test_tokens_are_stored_as_digests_and_found_by_digest(sqlite_shop: Shop) -> None:
    app = sqlite_shop.app
    token = sqlite_shop.tokens["viewer"]
    path = app.url.redacted().removeprefix("sqlite:///")
    raw = Path(path).read_bytes() + (
        Path(path + "-wal").read_bytes() if Path(path + "-wal").exists() else b""
    )
    assert token.encode() not in raw
    assert hashlib.sha256(token.encode()).hexdigest().encode() in raw


def test_a_foreign_task_name_is_refused_without_importing_it(sqlite_shop: Shop) -> None:
    app = sqlite_shop.app
    canary = "tests.web.canary_never_imported"
    admin = bearer(sqlite_shop.tokens["admin"])
    [row] = app.driver.job_insert_many(
        [
            JobInsert(
                task=f"{canary}:boom", queue="default", args_json="{}", priority=0, max_attempts=1
            )
        ]
    )
    with dashboard(app) as client:
        made = client.post("/api/jobs", json={"task": f"{canary}:boom", "args": {}}, headers=admin)
        assert made.status_code == 422 and "unknown task" in made.json()["detail"]
        assert client.get(f"/api/jobs/{row.id}", headers=admin).status_code == 200
        assert client.post(f"/api/jobs/{row.id}/cancel", headers=admin).status_code == 200
    assert canary not in sys.modules
