"""The dashboard's front door, as ASGI middleware in front of every route: the path prefix
(`--root-path`), the Host names it answers to (DNS rebinding), the rules every write must
follow (the dashboard's header, a same-site Origin, a JSON body), body size limits enforced
while reading, and the security headers on every answer."""

from __future__ import annotations

import html
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import urlsplit

from starlette.responses import HTMLResponse, Response

from rota.web.problems import Problem, problem_response
from rota.web.settings import LOGIN_BODY_BYTES, WebSettings, normalize_host

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

# Sent by the dashboard's own scripts. A page on another site cannot add a custom header
# to a cross-site request without a CORS preflight, which this server never grants.
CSRF_HEADER = "x-rota-request"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# Endpoints a stranger may call: their bodies are a token or a code, so they get the
# small limit.
LOGIN_PATHS = frozenset({"/api/session", "/api/session/link"})

# No inline script anywhere (app.js is a file); styles may be inline (the pages set
# widths and colours in style attributes); nothing may frame the dashboard.
CONTENT_SECURITY_POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self' 'unsafe-inline'",
        "img-src 'self' data:",
        "connect-src 'self'",
        "font-src 'self'",
        "object-src 'none'",
        "base-uri 'none'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    ]
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),
)


class BodyTooLarge(Problem):
    def __init__(self, limit: int) -> None:
        super().__init__(
            413,
            f"the request body is over this endpoint's {limit}-byte limit",
            kind="too-large",
        )


def _headers(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for key, value in scope.get("headers", []):
        found.setdefault(key.decode("latin-1").lower(), value.decode("latin-1"))
    return found


def _port_of(scheme: str, netloc_port: int | None) -> int:
    if netloc_port is not None:
        return netloc_port
    return 443 if scheme in ("https", "wss") else 80


def same_origin(origin: str, host_header: str, scheme: str) -> bool:
    """Whether an Origin header names the host (and port) this request was sent to."""
    try:
        parts = urlsplit(origin)
        origin_port = parts.port
    except ValueError:
        return False
    if not parts.scheme or not parts.hostname:
        return False
    try:
        own = urlsplit(f"{scheme}://{host_header}")
        own_port = own.port
    except ValueError:
        return False
    if (parts.hostname or "").lower() != normalize_host(host_header):
        return False
    # The scheme seen here may be http behind a TLS proxy: compare ports by each side's
    # own scheme, so https://ops.example.com matches Host ops.example.com either way.
    return _port_of(parts.scheme, origin_port) == _port_of(parts.scheme, own_port)


class Door:
    """ASGI middleware: everything here runs before any route sees the request."""

    def __init__(self, app: ASGIApp, settings: WebSettings) -> None:
        self.app = app
        self.settings = settings

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                extra = [(k, v) for k, v in SECURITY_HEADERS if k not in present]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        self._strip_root(scope)
        headers = _headers(scope)
        refusal = self._refusal(scope, headers)
        if refusal is not None:
            await refusal(scope, receive, send_secured)
            return
        path = scope["path"]
        limit = LOGIN_BODY_BYTES if path in LOGIN_PATHS else self.settings.max_body_bytes
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            # Refused unread: the connection closes, the body is never buffered.
            await self._problem(scope, BodyTooLarge(limit))(scope, receive, send_secured)
            return
        await self.app(scope, _capped(receive, limit), send_secured)

    def _strip_root(self, scope: Scope) -> None:
        """Serve under the prefix whether the proxy passes it on or strips it."""
        root = self.settings.root_path
        if not root:
            return
        path: str = scope["path"]
        if path == root or path.startswith(root + "/"):
            scope["path"] = path[len(root) :] or "/"
            raw = scope.get("raw_path")
            if isinstance(raw, bytes) and raw.startswith(root.encode()):
                scope["raw_path"] = raw[len(root) :] or b"/"

    def _problem(self, scope: Scope, problem: Problem) -> Response:
        if scope["path"].startswith("/api/") or scope["method"] not in SAFE_METHODS:
            return problem_response(
                problem.status, problem.detail, kind=problem.kind, instance=scope["path"]
            )
        detail = html.escape(problem.detail)
        body = f"<!doctype html><title>rota</title><h1>{problem.status}</h1><p>{detail}</p>"
        return HTMLResponse(body, status_code=problem.status)

    def _refusal(self, scope: Scope, headers: dict[str, str]) -> Response | None:
        settings = self.settings
        host = headers.get("host", "")
        if not settings.host_allowed(host):
            # DNS rebinding: a page of rebind.attacker.example whose name now resolves to
            # this machine talks to us as its own origin. Answer nothing it could use.
            return self._problem(
                scope,
                Problem(
                    400,
                    f"this dashboard does not answer to the host name {host!r}: add it with "
                    "--allowed-host (ROTA_DASHBOARD_ALLOWED_HOSTS)",
                    kind="unknown-host",
                ),
            )
        method = scope["method"]
        if method in SAFE_METHODS:
            return None
        if headers.get("sec-fetch-site") == "cross-site":
            return self._problem(
                scope, Problem(403, "a write from another site's page is refused (origin)")
            )
        origin = headers.get("origin")
        if origin is not None and not same_origin(origin, host, scope.get("scheme", "http")):
            return self._problem(
                scope,
                Problem(403, f"a write from origin {origin!r} is refused: not this dashboard"),
            )
        bearer = headers.get("authorization", "").lower().startswith("bearer ")
        # Whatever a browser sends on its own (a cookie; with --no-auth, nothing at all)
        # must not be enough for a write: only the dashboard's own scripts send the
        # header. The login endpoints need it always (login CSRF). A write that carries
        # no credentials goes on, to be answered 401.
        ambient = settings.no_auth or (not bearer and "cookie" in headers)
        if (ambient or scope["path"] in LOGIN_PATHS) and headers.get(CSRF_HEADER) != "1":
            return self._problem(
                scope,
                Problem(
                    403,
                    f"a write without a bearer token needs the {CSRF_HEADER}: 1 header "
                    "(the dashboard's pages send it)",
                ),
            )
        has_body = headers.get("content-length", "0") not in ("", "0") or (
            "transfer-encoding" in headers
        )
        if has_body and not _is_json(headers.get("content-type", "")):
            return self._problem(
                scope,
                Problem(
                    415,
                    "send the body as JSON (Content-Type: application/json)",
                    kind="unsupported-media-type",
                ),
            )
        return None


def _is_json(content_type: str) -> bool:
    kind = content_type.partition(";")[0].strip().lower()
    return kind == "application/json" or (
        kind.startswith("application/") and kind.endswith("+json")
    )


def _capped(receive: Receive, limit: int) -> Receive:
    """`receive` that refuses a body (chunked, or longer than it said) past `limit`."""
    seen = 0

    async def wrapped() -> Message:
        nonlocal seen
        message = await receive()
        if message["type"] == "http.request":
            seen += len(message.get("body", b""))
            if seen > limit:
                raise BodyTooLarge(limit)
        return message

    return wrapped
