"""API tokens, for admins: list, create (the secret is shown once) and revoke."""

from __future__ import annotations

from rota.auth import Permission
from rota.web.api import Api, Call
from rota.web.models import NamePath, NewTokenOut, TokenBody, TokenOut
from rota.web.problems import Problem


def register(api: Api) -> None:
    api.tags["tokens"] = "API tokens (admin)."

    @api.route(
        "GET",
        "/api/tokens",
        permission=Permission.ADMIN,
        summary="List tokens",
        tag="tokens",
        response=TokenOut,
        many=True,
    )
    def list_tokens(call: Call) -> list[TokenOut]:
        """Every token with its role, lifetime and last use (never the secret)."""
        return [TokenOut.model_validate(t.to_json()) for t in call.app.tokens.list()]

    @api.route(
        "POST",
        "/api/tokens",
        permission=Permission.ADMIN,
        summary="Create a token",
        tag="tokens",
        body=TokenBody,
        response=NewTokenOut,
        status=201,
    )
    def create_token(call: Call) -> NewTokenOut:
        """A new token for a name and role, optionally with a lifetime (`expires_in`
        seconds); the secret is in this answer only."""
        b: TokenBody = call.body
        secret = call.app.tokens.create(b.name, b.role, expires=b.expires_in)
        return NewTokenOut(name=b.name, role=str(b.role), token=secret)

    @api.route(
        "DELETE",
        "/api/tokens/{name}",
        permission=Permission.ADMIN,
        summary="Revoke a token",
        tag="tokens",
        path_model=NamePath,
        status=204,
        errors=(404,),
    )
    def revoke_token(call: Call) -> None:
        """Revoke the live token with this name."""
        if not call.app.tokens.revoke(call.path.name):
            raise Problem(404, f"no live token named {call.path.name!r}", kind="not-found")
