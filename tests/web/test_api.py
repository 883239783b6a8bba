"""The HTTP JSON API on both dialects: authentication and roles, validation as problem
details, and every endpoint doing what the CLI does."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import rota
from rota.testing import drain
from tests.web.conftest import Site

PROBLEM = "application/problem+json"

# (method, path, body, permission the endpoint needs)
PROTECTED = [
    ("GET", "/api/me", None, "read"),
    ("GET", "/api/jobs", None, "read"),
    ("GET", "/api/jobs/1", None, "read"),
    ("POST", "/api/jobs", {"task": "shop.email", "args": {"to": "a@b"}}, "enqueue"),
    ("POST", "/api/jobs/1/retry", None, "operate"),
    ("POST", "/api/jobs/1/cancel", None, "operate"),
    ("GET", "/api/queues", None, "read"),
    ("GET", "/api/queues/series", None, "read"),
    ("POST", "/api/queues/payments/pause", None, "operate"),
    ("POST", "/api/queues/payments/resume", None, "operate"),
    ("GET", "/api/schedules", None, "read"),
    ("GET", "/api/schedules/nightly", None, "read"),
    ("POST", "/api/schedules/nightly/trigger", {}, "operate"),
    ("POST", "/api/schedules/nightly/suspend", None, "operate"),
    ("POST", "/api/schedules/nightly/resume", None, "operate"),
    ("GET", "/api/dead-letters", None, "dlq_read"),
    ("POST", "/api/dead-letters/1/retry", None, "operate"),
    ("POST", "/api/dead-letters/replay", {"reason": "r", "all": True, "dry_run": True}, "dlq_read"),
    ("POST", "/api/dead-letters/dismiss", {"ids": [1], "reason": "r"}, "operate"),
    ("GET", "/api/dead-letters/replays", None, "dlq_read"),
    ("GET", "/api/workers", None, "read"),
    ("GET", "/api/database", None, "read"),
    ("GET", "/api/tokens", None, "admin"),
    ("POST", "/api/tokens", {"name": "new-one", "role": "viewer"}, "admin"),
    ("DELETE", "/api/tokens/t-viewer", None, "admin"),
    ("GET", "/api/openapi.json", None, "read"),
]


def _call(site: Site, method: str, path: str, body: object, headers: dict[str, str]):
    return site.client.request(method, path, json=body, headers=headers)


def test_only_health_answers_without_a_token(site: Site) -> None:
    health = site.client.get("/api/health")
    assert health.status_code == 200
    assert health.json()["status"] == "ok" and health.json()["schema_version"] >= 1
    for method, path, body, _ in PROTECTED:
        response = _call(site, method, path, body, {})
        assert response.status_code == 401, (method, path)
        assert response.headers["content-type"] == PROBLEM
        assert response.headers["www-authenticate"].startswith("Bearer")
        assert response.json()["status"] == 401
    bad = {"Authorization": "Bearer rota_not-a-real-token"}
    assert site.client.get("/api/jobs", headers=bad).status_code == 401
    assert site.client.get("/api/jobs", headers={"Authorization": "Basic eDp5"}).status_code == 401


def test_each_role_gets_exactly_its_permissions(site: Site) -> None:
    site.app.schedule("shop.email", "0 3 * * *", name="nightly", args={"to": "ops@x"})
    site.app.sync_schedules()
    site.app.enqueue("shop.email", {"to": "x@y"})
    for role in ["viewer", "operator", "replayer", "admin"]:
        granted = {str(p) for p in rota.auth.permissions_of(rota.Role(role))}
        for method, path, body, needs in PROTECTED:
            if role == "admin" and path == "/api/tokens/t-viewer":
                continue  # keep the viewer's token for the other roles' turn
            response = _call(site, method, path, body, site.as_(role))
            if needs in granted:
                assert response.status_code not in (401, 403), (role, method, path, response.text)
            else:
                assert response.status_code == 403, (role, method, path, response.text)
                problem = response.json()
                assert response.headers["content-type"] == PROBLEM
                assert needs in problem["detail"] and problem["type"].endswith("/forbidden")
    revoked = site.client.delete("/api/tokens/t-viewer", headers=site.as_("admin"))
    assert revoked.status_code == 204


def test_revoked_token_is_refused_at_once(site: Site) -> None:
    headers = site.as_("viewer")
    assert site.client.get("/api/jobs", headers=headers).status_code == 200
    assert site.client.delete("/api/tokens/t-viewer", headers=site.as_("admin")).status_code == 204
    assert site.client.get("/api/jobs", headers=headers).status_code == 401
    again = site.client.delete("/api/tokens/t-viewer", headers=site.as_("admin"))
    assert again.status_code == 404 and again.headers["content-type"] == PROBLEM


INVALID = [
    ("GET", "/api/jobs?limit=0", None),
    ("GET", "/api/jobs?limit=abc", None),
    ("GET", "/api/jobs?state=exploded", None),
    ("GET", "/api/jobs?id=-3", None),
    ("GET", "/api/jobs?id=99999999999999999999999", None),
    ("GET", "/api/jobs?q=%00", None),
    ("GET", "/api/jobs/abc", None),
    ("GET", "/api/jobs/0", None),
    ("GET", "/api/queues/series?bucket=1", None),
    ("POST", "/api/jobs", {"args": {}}),
    ("POST", "/api/jobs", {"task": "shop.email", "args": [1, 2]}),
    ("POST", "/api/jobs", {"task": "shop.email", "args": {}, "surprise": 1}),
    ("POST", "/api/jobs", {"task": "shop.email", "args": {"to": "a"}, "priority": 10**9}),
    ("POST", "/api/tokens", {"name": "bad name!", "role": "viewer"}),
    ("POST", "/api/tokens", {"name": "ok", "role": "emperor"}),
    ("POST", "/api/queues/%20bad%0Aqueue/pause", None),
]


def test_invalid_input_is_a_422_problem(site: Site) -> None:
    for method, path, body in INVALID:
        response = _call(site, method, path, body, site.as_("admin"))
        assert response.status_code == 422, (method, path, response.text)
        assert response.headers["content-type"] == PROBLEM
        problem = response.json()
        assert problem["status"] == 422 and problem["title"] and problem["detail"]
        assert problem["instance"].startswith("/api/")


def test_malformed_json_body_is_a_400_problem(site: Site) -> None:
    response = site.client.post(
        "/api/jobs",
        content=b"{not json",
        headers={**site.as_("admin"), "Content-Type": "application/json"},
    )
    assert response.status_code == 400 and response.headers["content-type"] == PROBLEM


def test_arguments_that_do_not_bind_are_a_422(site: Site) -> None:
    body = {"task": "shop.email", "args": {"too": "x"}}
    response = site.client.post("/api/jobs", json=body, headers=site.as_("operator"))
    assert response.status_code == 422 and "to" in response.json()["detail"]
    unknown = {"task": "shop.nope", "args": {}}
    response = site.client.post("/api/jobs", json=unknown, headers=site.as_("operator"))
    assert response.status_code == 422 and "unknown task" in response.json()["detail"]


def test_job_search_by_id_key_task_state_and_text(site: Site) -> None:
    a = site.app.enqueue("shop.charge", {"order": 42, "note": "Gift Wrap"}, key="order-42")
    b = site.app.enqueue("shop.charge", {"order": 7})
    c = site.app.enqueue("shop.email", {"to": "ada@example.com"})
    # Text in the arguments is payload: searching it needs dlq_read (an operator has it).
    h = site.as_("operator")

    def ids(query: str) -> list[int]:
        response = site.client.get("/api/jobs" + query, headers=h)
        assert response.status_code == 200, response.text
        return [j["id"] for j in response.json()]

    assert ids("") == [c.id, b.id, a.id]
    assert ids(f"?q={a.id}") == [a.id]
    assert ids("?q=order-42") == [a.id]
    assert ids("?key=order-42") == [a.id]
    assert ids("?q=shop.email") == [c.id]
    assert ids("?task=shop.charge") == [b.id, a.id]
    assert ids("?q=gift%20wrap") == [a.id]  # text in the arguments, any case
    assert ids("?text=example.com") == [c.id]
    assert ids("?queue=mail") == [c.id]
    assert ids("?state=available&state=running") == [c.id, b.id, a.id]
    assert ids("?state=completed") == []
    assert ids(f"?before_id={c.id}&limit=1") == [b.id]
    assert ids("?q=%25") == []  # LIKE wildcards are plain text here
    assert ids("?q=nothing-like-it") == []
    # The tenant filter (the dashboard's Cancel matching selects by it too, #19).
    d = site.app.enqueue("shop.email", {"to": "acme@example.com"}, tenant="acme")
    assert ids("?tenant=acme") == [d.id]
    assert ids("?tenant=acme&queue=payments") == []
    # An id or a key of another tenant's job is not found under this tenant's filter.
    assert ids(f"?tenant=acme&id={a.id}") == []
    assert ids("?tenant=acme&key=order-42") == []
    assert ids(f"?tenant=acme&id={d.id}") == [d.id]
    assert ids(f"?tenant=acme&q={a.id}") == []


def test_job_page_data_has_attempts_tracebacks_checkpoint_and_steps(site: Site) -> None:
    app = site.app

    @app.task(name="shop.ship", max_attempts=3, backoff=rota.Backoff(base=0, jitter=False))
    def ship(ctx: rota.Context, order: int) -> None:
        ctx.step("reserve", lambda: {"bin": 7})
        ctx.checkpoint({"packed": order})
        raise RuntimeError("carrier offline")

    job = app.enqueue("shop.ship", {"order": 5})
    drain(app, ["default"], with_scheduled=True)
    data = site.client.get(f"/api/jobs/{job.id}", headers=site.as_("operator")).json()
    assert data["state"] == "discarded" and data["attempt"] == 3
    assert [a["outcome"] for a in data["history"]] == ["failed", "failed", "discarded"]
    assert all("carrier offline" in a["message"] for a in data["history"])
    assert "RuntimeError" in data["history"][0]["traceback"]
    assert data["checkpoint"] == {"packed": 5}
    assert data["steps"] == {"reserve": {"bin": 7}}
    missing = site.client.get("/api/jobs/999999", headers=site.as_("viewer"))
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM


def test_enqueue_retry_and_cancel(site: Site) -> None:
    h = site.as_("operator")
    made = site.client.post(
        "/api/jobs",
        json={"task": "shop.email", "args": {"to": "a@b"}, "key": "k1", "delay": 60},
        headers=h,
    )
    assert made.status_code == 201, made.text
    job = made.json()
    assert job["state"] == "scheduled" and job["key"] == "k1" and job["queue"] == "mail"
    cancelled = site.client.post(f"/api/jobs/{job['id']}/cancel", headers=h)
    assert cancelled.json()["state"] == "cancelled"
    again = site.client.post(f"/api/jobs/{job['id']}/cancel", headers=h)
    assert again.status_code == 409 and again.headers["content-type"] == PROBLEM
    retried = site.client.post(f"/api/jobs/{job['id']}/retry", headers=h)
    assert retried.status_code == 200 and retried.json()["state"] == "available"
    assert site.client.post("/api/jobs/424242/retry", headers=h).status_code == 404


def test_queues_depth_series_pause_and_resume(site: Site) -> None:
    # The oldest was due an hour ago on the database clock: its age is known.
    inserted = site.app.driver.db_now()
    for order in range(3):
        at = inserted - timedelta(hours=1) if order == 0 else None
        site.app.enqueue("shop.charge", {"order": order}, at=at)
    site.app.enqueue("shop.email", {"to": "x"})
    drain(site.app, ["mail"])
    h = site.as_("operator")
    queues = {q["name"]: q for q in site.client.get("/api/queues", headers=h).json()}
    since = (site.app.driver.db_now() - inserted).total_seconds()
    assert queues["payments"]["depth"] == 3 and queues["payments"]["paused"] is False
    assert 3600 <= queues["payments"]["oldest_available_age_s"] <= 3600 + since + 0.01
    assert queues["mail"]["counts"] == {"completed": 1} and queues["mail"]["depth"] == 0
    series = site.client.get("/api/queues/series?window=600&bucket=60", headers=h).json()
    assert series["window"] == 600
    assert sum(series["series"]["payments"]["enqueued"]) == 3
    assert sum(series["series"]["mail"]["completed"]) == 1
    assert len(series["series"]["mail"]["completed"]) == 10
    paused = site.client.post("/api/queues/payments/pause", headers=h)
    assert paused.json() == {"name": "payments", "paused": True, "held_by": ["manual"]}
    queues = {q["name"]: q for q in site.client.get("/api/queues", headers=h).json()}
    assert queues["payments"]["paused"] is True
    resumed = site.client.post("/api/queues/payments/resume", headers=h)
    assert resumed.json() == {"name": "payments", "paused": False, "held_by": []}
    assert [q.paused for q in site.app.list_queues() if q.name == "payments"] == [False]
    # A closed processing window still holds the queue after the operator's resume.
    hour = (datetime.now(UTC).hour + 2) % 24
    site.app.queues.set_window("payments", f"{hour:02d}:00-{hour:02d}:30", tz="UTC")
    site.client.post("/api/queues/payments/pause", headers=h)
    resumed = site.client.post("/api/queues/payments/resume", headers=h)
    assert resumed.json() == {"name": "payments", "paused": True, "held_by": ["window"]}


def test_schedules_list_show_trigger_suspend_resume(site: Site) -> None:
    site.app.schedule(
        "shop.email", "*/5 * * * *", name="digest", args={"to": "team"}, tz="Europe/Berlin"
    )
    site.app.sync_schedules()
    h = site.as_("operator")
    listed = site.client.get("/api/schedules", headers=h).json()
    assert [s["name"] for s in listed] == ["digest"]
    assert listed[0]["next_runs_utc"] and listed[0]["timezone"] == "Europe/Berlin"
    run = site.client.post("/api/schedules/digest/trigger", json={"name": "by-hand"}, headers=h)
    assert run.status_code == 201 and run.json()["trigger"] == "manual"
    detail = site.client.get("/api/schedules/digest", headers=h).json()
    assert len(detail["next_runs"]) == 5 and detail["history"][0]["name"] == "by-hand"
    assert detail["history"][0]["job_id"] is not None
    assert site.client.post("/api/schedules/digest/suspend", headers=h).json()["suspended"]
    resumed = site.client.post("/api/schedules/digest/resume", headers=h).json()
    assert resumed["suspended"] is False
    missing = site.client.get("/api/schedules/nope", headers=h)
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM


def test_dead_letters_list_and_retry(site: Site) -> None:
    job = site.app.enqueue("shop.charge", {"order": 9}, max_attempts=1)
    ok = site.app.enqueue("shop.email", {"to": "x"})
    drain(site.app)
    h = site.as_("operator")
    dead = site.client.get("/api/dead-letters", headers=h).json()
    assert [d["id"] for d in dead] == [job.id]
    assert dead[0]["history"][0]["error_type"] == "ValueError"
    not_dead = site.client.post(f"/api/dead-letters/{ok.id}/retry", headers=h)
    assert not_dead.status_code == 404
    retried = site.client.post(f"/api/dead-letters/{job.id}/retry", headers=h)
    assert retried.status_code == 200 and retried.json()["state"] == "available"
    assert site.client.get("/api/dead-letters", headers=h).json() == []


def test_workers_and_leader(site: Site) -> None:
    site.app.enqueue("shop.email", {"to": "x"})
    drain(site.app, worker_id="host-1.4242")
    assert site.app.driver.leader_attempt_elect("maintenance", "host-1.4242", 30)
    data = site.client.get("/api/workers", headers=site.as_("viewer")).json()
    assert [w["worker"] for w in data["workers"]] == ["host-1.4242"]
    assert data["workers"][0]["queues"] == ["mail"]
    assert data["workers"][0]["leader_of"] == ["maintenance"]
    assert data["leaders"][0]["leader"] == "host-1.4242" and data["leaders"][0]["live"]


def test_tokens_for_admins(site: Site) -> None:
    h = site.as_("admin")
    made = site.client.post("/api/tokens", json={"name": "ci-bot", "role": "operator"}, headers=h)
    assert made.status_code == 201
    secret = made.json()["token"]
    assert secret.startswith("rota_")
    names = [t["name"] for t in site.client.get("/api/tokens", headers=h).json()]
    assert "ci-bot" in names and all(
        "token" not in t for t in site.client.get("/api/tokens", headers=h).json()
    )
    me = site.client.get("/api/me", headers={"Authorization": f"Bearer {secret}"}).json()
    assert me["name"] == "ci-bot" and me["role"] == "operator" and "operate" in me["permissions"]
    dup = site.client.post("/api/tokens", json={"name": "ci-bot", "role": "viewer"}, headers=h)
    assert dup.status_code == 422


def test_browser_session_cookie_and_csrf_guard(site: Site) -> None:
    client = site.client
    page = {"X-Rota-Request": "1"}
    bad = client.post("/api/session", json={"token": "rota_nope"}, headers=page)
    assert bad.status_code == 401
    # Without the header another site could sign the browser in to its own token.
    forged = client.post("/api/session", json={"token": site.tokens["viewer"]})
    assert forged.status_code == 403 and "set-cookie" not in forged.headers
    login = client.post("/api/session", json={"token": site.tokens["operator"]}, headers=page)
    assert login.status_code == 200 and login.json()["role"] == "operator"
    assert "httponly" in login.headers["set-cookie"].lower()
    assert "samesite=strict" in login.headers["set-cookie"].lower()
    assert client.get("/api/queues").status_code == 200  # the cookie alone reads
    # A write with only the cookie could come from another site: it needs the header.
    assert client.post("/api/queues/mail/pause").status_code == 403
    ok = client.post("/api/queues/mail/pause", headers={"X-Rota-Request": "1"})
    assert ok.status_code == 200
    assert client.delete("/api/session").status_code == 403
    assert client.delete("/api/session", headers=page).status_code == 204
    client.cookies.clear()
    assert client.get("/api/queues").status_code == 401


def test_openapi_document_lists_every_endpoint(site: Site) -> None:
    doc = site.client.get("/api/openapi.json", headers=site.as_("viewer")).json()
    assert doc["openapi"].startswith("3.")
    ops = {(m.upper(), p) for p, item in doc["paths"].items() for m in item}
    api = site.client.app.state.api  # type: ignore[attr-defined]
    assert ops == {(e.method, e.path) for e in api.endpoints}
    search = doc["paths"]["/api/jobs"]["get"]
    assert {p["name"] for p in search["parameters"]} >= {"q", "key", "task", "state", "text"}
    assert search["x-permission"] == "read" and "401" in search["responses"]
    assert "security" not in doc["paths"]["/api/health"]["get"]


def test_pages_need_a_session(site: Site) -> None:
    client = site.client
    page = client.get("/jobs")
    assert page.status_code == 200 and 'data-page="login"' in page.text
    # A token in the URL no longer signs in (issue 22): cleaned away, to the sign-in page.
    entry = client.get(f"/jobs?q=x&token={site.tokens['admin']}", follow_redirects=False)
    assert entry.status_code == 303 and entry.headers["location"].startswith("/login?")
    login = client.post(
        "/api/session", json={"token": site.tokens["admin"]}, headers={"X-Rota-Request": "1"}
    )
    assert login.status_code == 200
    for path in [
        "/",
        "/jobs",
        "/jobs/1",
        "/schedules",
        "/schedules/a",
        "/dead-letters",
        "/workers",
        "/tokens",
    ]:
        response = client.get(path)
        assert response.status_code == 200 and 'data-page="login"' not in response.text, path
    assert client.get("/static/app.js").status_code == 200
    assert client.get("/nowhere").status_code == 404


def _dead(site: Site, count: int) -> list[int]:
    jobs = [site.app.enqueue("shop.charge", {"order": n}, max_attempts=1) for n in range(count)]
    drain(site.app, ["payments"])
    return [j.id for j in jobs]


def test_governed_replay_dry_run_first_then_audited(site: Site) -> None:
    ids = _dead(site, 3)
    site.app.enqueue("shop.email", {"to": "x"}, max_attempts=1)
    body = {"task": "shop.charge", "reason": "gateway fixed", "rate": 10.0}
    # A dry run counts and changes nothing; an operator may dry-run but not replay.
    dry = site.client.post(
        "/api/dead-letters/replay", json={**body, "dry_run": True}, headers=site.as_("operator")
    )
    assert dry.status_code == 200, dry.text
    assert dry.json()["dry_run"] is True and dry.json()["count"] == 3
    assert dry.json()["per_task"] == {"shop.charge": 3} and dry.json()["replay_id"] is None
    assert len(site.app.dlq.list()) == 3
    refused = site.client.post("/api/dead-letters/replay", json=body, headers=site.as_("operator"))
    assert refused.status_code == 403 and "replay" in refused.json()["detail"]
    viewer = site.client.post(
        "/api/dead-letters/replay", json={**body, "dry_run": True}, headers=site.as_("viewer")
    )
    assert viewer.status_code == 403
    done = site.client.post("/api/dead-letters/replay", json=body, headers=site.as_("replayer"))
    assert done.status_code == 200, done.text
    report = done.json()
    assert report["count"] == 3 and sorted(report["job_ids"]) == sorted(ids)
    assert report["principal"].startswith("token:t-replayer") and report["seconds"] > 0
    assert site.app.dlq.list() == []
    again = site.client.post("/api/dead-letters/replay", json=body, headers=site.as_("replayer"))
    assert again.json()["count"] == 0  # replayed jobs are no longer dead letters
    log = site.client.get("/api/dead-letters/replays", headers=site.as_("viewer"))
    assert log.status_code == 403
    log = site.client.get("/api/dead-letters/replays", headers=site.as_("replayer")).json()
    assert log[0]["reason"] == "gateway fixed" and log[0]["count"] in (0, 3)
    assert any(r["count"] == 3 and r["selection"] == {"task": "shop.charge"} for r in log)


def test_replay_refuses_an_unbounded_selection_and_filters_dead_letters(site: Site) -> None:
    _dead(site, 2)
    h = site.as_("admin")
    unbounded = site.client.post("/api/dead-letters/replay", json={"reason": "x"}, headers=h)
    assert unbounded.status_code == 422 and "narrow the selection" in unbounded.json()["detail"]
    no_reason = site.client.post("/api/dead-letters/replay", json={"all": True}, headers=h)
    assert no_reason.status_code == 422
    by_error = site.client.get("/api/dead-letters?error_type=ValueError", headers=h).json()
    assert len(by_error) == 2
    assert site.client.get("/api/dead-letters?error_type=KeyError", headers=h).json() == []
    by_text = site.client.get("/api/dead-letters?text=card%20declined%20for%20order%201", headers=h)
    assert len(by_text.json()) == 1


def test_dismiss_dead_letters(site: Site) -> None:
    ids = _dead(site, 2)
    h = site.as_("operator")
    out = site.client.post(
        "/api/dead-letters/dismiss", json={"ids": [ids[0], 999], "reason": "duplicate"}, headers=h
    )
    assert out.status_code == 200 and out.json() == {"dismissed": [ids[0]]}
    assert site.app.get_job(ids[0]).state is rota.JobState.CANCELLED
    assert [j.id for j in site.app.dlq.list()] == [ids[1]]


def test_http_api_page_lists_every_endpoint() -> None:
    from pathlib import Path

    from rota.web.server import build_api

    page = (Path(__file__).resolve().parents[2] / "docs" / "http-api.md").read_text()
    for endpoint in build_api().endpoints:
        assert f"`{endpoint.method} {endpoint.path}`" in page, endpoint.path
