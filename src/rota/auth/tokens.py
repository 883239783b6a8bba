"""API tokens: random secrets shown once, stored as SHA-256 digests with a role."""

from __future__ import annotations

import builtins
import hashlib
import re
import secrets
from typing import TYPE_CHECKING

from rota.auth.roles import Principal, Role
from rota.drivers.base import TokenRecord
from rota.errors import ArgumentsError, AuthenticationError

if TYPE_CHECKING:
    from rota.app import App

TOKEN_PREFIX = "rota_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$")


def digest(token: str) -> str:
    # Tokens carry 256 bits of randomness: a plain hash is enough (no slow KDF needed).
    return hashlib.sha256(token.encode()).hexdigest()


class TokenRegistry:
    """`app.tokens`: create, list, revoke and check API tokens."""

    def __init__(self, app: App) -> None:
        self._app = app

    def create(self, name: str, role: Role | str) -> str:
        """A new token for `name` with `role`; the secret is returned once, never stored."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise ArgumentsError(
                f"a token name is 1-64 characters: letters, digits and _ . : @ - (got {name!r})"
            )
        try:
            parsed = Role(role)
        except ValueError:
            roles = ", ".join(r.value for r in Role)
            raise ArgumentsError(f"unknown role {role!r}: one of {roles}") from None
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        if not self._app.driver.tokens.insert(name, digest(token), parsed.value):
            raise ArgumentsError(f"a token named {name!r} exists already; revoke it first")
        return token

    def list(self) -> builtins.list[TokenRecord]:
        return self._app.driver.tokens.all()

    def revoke(self, name: str) -> bool:
        """Revoke the token called `name`; False when no live token has that name."""
        return self._app.driver.tokens.revoke(name)

    def authenticate(self, token: str | None) -> Principal:
        """The principal a bearer token stands for; AuthenticationError if none."""
        if not token or not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            raise AuthenticationError("missing or malformed API token")
        record = self._app.driver.tokens.find(digest(token))
        if record is None or record.revoked_at is not None:
            raise AuthenticationError("unknown or revoked API token")
        return Principal(name=record.name, role=Role(record.role), via="token")
