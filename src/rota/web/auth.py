"""Who calls: a bearer token (API clients), the dashboard's session cookie (the browser),
or nobody at all with `--no-auth` on a loopback address."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from starlette.requests import Request

from rota.auth import Principal, Role
from rota.errors import AuthenticationError, ConfigurationError, PermissionDeniedError

if TYPE_CHECKING:
    from rota.standard import App

COOKIE = "rota_token"
# Sent by the dashboard's own scripts: a page on another site cannot add a custom header to
# a cross-site request without a CORS preflight (which this server never grants), so a
# cookie-authenticated write that carries it comes from the dashboard (CSRF guard).
CSRF_HEADER = "x-rota-request"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


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

    def token_of(self, request: Request) -> tuple[str | None, bool]:
        """The token a request carries, and whether it came from the session cookie."""
        header = request.headers.get("authorization", "")
        scheme, _, value = header.partition(" ")
        if scheme.lower() == "bearer" and value.strip():
            return value.strip(), False
        cookie = request.cookies.get(COOKIE)
        return (cookie, True) if cookie else (None, False)

    def __call__(self, request: Request) -> Principal:
        if self.no_auth:
            return Principal(name="local", role=Role.ADMIN, via="direct")
        token, from_cookie = self.token_of(request)
        if token is None:
            raise AuthenticationError(
                "send `Authorization: Bearer <token>`; create one with "
                "`rota tokens create NAME --role viewer`"
            )
        principal = self.app.tokens.authenticate(token)
        if (
            from_cookie
            and request.method not in SAFE_METHODS
            and request.headers.get(CSRF_HEADER) != "1"
        ):
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
