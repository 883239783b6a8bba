"""Who calls: a bearer token (API clients), the dashboard's session cookie (a browser
session of its own, never the token), or nobody at all with `--no-auth` on a loopback
address."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from starlette.requests import Request

from rota.auth import Principal, Role
from rota.errors import AuthenticationError, ConfigurationError, PermissionDeniedError
from rota.web.door import CSRF_HEADER, SAFE_METHODS

if TYPE_CHECKING:
    from rota.standard import App

# The session cookie: an opaque session secret, not the API token.
COOKIE = "rota_session"
# The cookie of rota before sessions: it carried the token itself. Never read any more;
# deleted on sign-in and sign-out.
OLD_COOKIE = "rota_token"
__all__ = ["COOKIE", "CSRF_HEADER", "OLD_COOKIE", "Authenticator", "check_no_auth"]


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_no_auth(host: str) -> None:
    """--no-auth gives everyone admin rights: allow it only where only this machine can
    connect."""
    if not is_loopback(host):
        raise ConfigurationError(
            f"--no-auth serves everything without a token: bind it to 127.0.0.1 (or ::1), "
            f"not {host!r}, or create a token with `rota tokens create NAME --role viewer`"
        )


class Authenticator:
    def __init__(self, app: App, *, no_auth: bool = False) -> None:
        self.app = app
        self.no_auth = no_auth

    def bearer_of(self, request: Request) -> str | None:
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip()
        return None

    def __call__(self, request: Request) -> Principal:
        if self.no_auth:
            return Principal(name="local", role=Role.ADMIN, via="direct")
        token = self.bearer_of(request)
        if token is not None:
            return self.app.tokens.authenticate(token)
        session = request.cookies.get(COOKIE)
        if session is None:
            raise AuthenticationError(
                "send `Authorization: Bearer <token>`; create one with "
                "`rota tokens create NAME --role viewer`"
            )
        principal = self.app.tokens.session(session)
        # The door already refuses such writes; kept here so that the rule holds for
        # this class on its own too.
        if request.method not in SAFE_METHODS and request.headers.get(CSRF_HEADER) != "1":
            raise PermissionDeniedError(
                f"a write with the session cookie needs the {CSRF_HEADER} header"
            )
        return principal

    def page_principal(self, request: Request) -> Principal | None:
        """The browser's principal for a page, or None (show the login page)."""
        try:
            return self(request)
        except AuthenticationError:
            return None
