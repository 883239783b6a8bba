"""API tokens and roles: secrets shown once, stored hashed, revocable; roles grant
exactly their permissions."""

from __future__ import annotations

import pytest

import rota
from rota.auth.store import TokenStore
from rota.auth.tokens import digest


def test_token_round_trip(app: rota.App) -> None:
    token = app.tokens.create("ops-bot", "replayer")
    principal = app.tokens.authenticate(token)
    assert principal == rota.Principal(name="ops-bot", role=rota.Role.REPLAYER, via="token")
    assert principal.can(rota.Permission.REPLAY)
    assert not principal.can(rota.Permission.ENQUEUE)
    [record] = app.tokens.list()
    assert (record.name, record.role, record.revoked_at) == ("ops-bot", "replayer", None)


def test_only_the_digest_is_stored(app: rota.App) -> None:
    token = app.tokens.create("viewer-1", rota.Role.VIEWER)
    assert TokenStore(app.driver).find(digest(token)) is not None
    assert TokenStore(app.driver).find(token) is None  # the secret itself is not a key


def test_revoked_and_unknown_tokens_are_refused(app: rota.App) -> None:
    token = app.tokens.create("temp", "operator")
    assert app.tokens.revoke("temp")
    assert not app.tokens.revoke("temp")  # already revoked
    for bad in (token, "rota_nope", "", None, "Bearer x", "x" * 10_000):
        with pytest.raises(rota.AuthenticationError):
            app.tokens.authenticate(bad)
    # A revoked name may be issued again, with a new secret.
    fresh = app.tokens.create("temp", "viewer")
    assert app.tokens.authenticate(fresh).role is rota.Role.VIEWER
    with pytest.raises(rota.AuthenticationError):
        app.tokens.authenticate(token)


def test_bad_names_and_roles_are_refused(app: rota.App) -> None:
    app.tokens.create("dup", "viewer")
    with pytest.raises(rota.ArgumentsError, match="exists already"):
        app.tokens.create("dup", "admin")
    for name in ("", " space", "x" * 65, "semi;colon", "'; DROP TABLE rota_jobs; --"):
        with pytest.raises(rota.ArgumentsError, match="token name"):
            app.tokens.create(name, "viewer")
    with pytest.raises(rota.ArgumentsError, match="unknown role"):
        app.tokens.create("ok", "superuser")
    assert [t.name for t in app.tokens.list()] == ["dup"]


def test_role_grants() -> None:
    p = rota.Permission
    viewer = rota.Principal("v", rota.Role.VIEWER, "token")
    operator = rota.Principal("o", rota.Role.OPERATOR, "token")
    replayer = rota.Principal("r", rota.Role.REPLAYER, "token")
    assert viewer.permissions == {p.READ}
    assert p.REPLAY not in operator.permissions and p.ENQUEUE in operator.permissions
    assert p.ENQUEUE not in replayer.permissions and p.REPLAY in replayer.permissions
    with pytest.raises(rota.PermissionDeniedError, match="replay"):
        operator.require(p.REPLAY)
    direct = rota.Principal.direct()
    assert direct.role is rota.Role.ADMIN and direct.describe().startswith("direct:")


def test_meta_travels_with_the_job(app: rota.App) -> None:
    @app.task
    def noop() -> None: ...

    row = noop.build({}, meta={"batch": 7, "index": 3})
    [job] = app._insert([row], conn=None, tasks=[noop])
    assert app.get_job(job.id).meta == {"batch": 7, "index": 3}  # type: ignore[union-attr]
    plain = noop.enqueue()
    assert plain.meta == {}
