"""The ASGI app of `rota dashboard`: the JSON API under /api, its OpenAPI document, the
dashboard pages (Jinja2 templates rendered once; their data comes from the API) and the
static files, behind the door (rota.web.door). `create_app(app)` builds it."""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from rota import __version__
from rota.auth import Permission, Principal
from rota.auth.tokens import link_problem
from rota.errors import AuthenticationError
from rota.plugin import Feature
from rota.standard import standard_features
from rota.web import features
from rota.web.api import Api, Call
from rota.web.auth import COOKIE, OLD_COOKIE, Authenticator
from rota.web.door import Door
from rota.web.models import LinkBody, MeOut, SessionBody
from rota.web.problems import from_exception, problem_response
from rota.web.routes import ROUTERS
from rota.web.settings import WebSettings

if TYPE_CHECKING:
    from rota.standard import App

HERE = Path(__file__).parent
NOTICES = {
    "token-in-url": (
        "A token in a link no longer signs in: it would stay in the browser history and "
        "in logs. Paste it below, or ask for a single-use link: "
        "rota dashboard login-url --token-name NAME"
    ),
}


def build_api(
    settings: WebSettings | None = None, feature_set: Iterable[Feature] | None = None
) -> Api:
    """The API of the engine and of `feature_set` (default: every standard feature)."""
    api = Api(title="rota", version=__version__)
    for register in ROUTERS:
        register(api)
    for feature in standard_features() if feature_set is None else feature_set:
        for reference in feature.routes:
            module_name, _, attribute = reference.partition(":")
            getattr(importlib.import_module(module_name), attribute)(api)
    _session_routes(api, settings or WebSettings())
    return api


def me_of(app: App, principal: Principal) -> MeOut:
    return MeOut(
        name=principal.name,
        role=str(principal.role),
        permissions=sorted(str(p) for p in principal.permissions),
        features=features.available(app),
    )


def _session_routes(api: Api, settings: WebSettings) -> None:
    api.tags["session"] = "The dashboard's browser session (a session of its own in a cookie)."

    @api.route(
        "POST",
        "/api/session",
        permission=None,
        summary="Log in",
        tag="session",
        body=SessionBody,
        response=MeOut,
        errors=(401, 403),
    )
    def login(call: Call) -> Response:
        """Check a token and open a browser session for it, kept in an HttpOnly,
        SameSite=Strict cookie (the cookie holds the session, never the token). Needs the
        X-Rota-Request header, so another site cannot sign a browser in (login CSRF)."""
        secret, principal = call.app.tokens.start_session(call.body.token, settings.session_seconds)
        response = JSONResponse(me_of(call.app, principal).model_dump(mode="json"))
        set_session(response, secret, call.request, settings)
        return response

    @api.route(
        "POST",
        "/api/session/link",
        permission=None,
        summary="Log in with a login link",
        tag="session",
        body=LinkBody,
        response=MeOut,
        errors=(401, 403),
    )
    def login_by_link(call: Call) -> Response:
        """Exchange the code of a login link (`rota dashboard login-url`) for a browser
        session: once, within the link's lifetime. Needs the X-Rota-Request header, so only
        the dashboard's own link page can send it (a link followed from another site never
        signs anyone in by itself)."""
        secret, principal = call.app.tokens.redeem_login_link(
            call.body.code, settings.session_seconds
        )
        response = JSONResponse(me_of(call.app, principal).model_dump(mode="json"))
        set_session(response, secret, call.request, settings)
        return response

    @api.route(
        "DELETE",
        "/api/session",
        permission=None,
        summary="Log out",
        tag="session",
        status=204,
        errors=(403,),
    )
    def logout(call: Call) -> Response:
        """End the browser session on the server and forget its cookie."""
        call.app.tokens.end_session(call.request.cookies.get(COOKIE))
        response = Response(status_code=204)
        clear_session(response, settings)
        return response


def cookie_path(settings: WebSettings) -> str:
    return settings.root_path or "/"


def set_session(response: Response, secret: str, request: Request, settings: WebSettings) -> None:
    response.set_cookie(
        COOKIE,
        secret,
        max_age=int(settings.session_seconds),
        path=cookie_path(settings),
        httponly=True,
        samesite="strict",
        # The scheme is the original one when a trusted proxy says so (uvicorn's
        # --forwarded-allow-ips); --secure-cookies marks it Secure regardless.
        secure=settings.secure_cookies or request.url.scheme == "https",
    )
    response.delete_cookie(OLD_COOKIE, path="/")


def clear_session(response: Response, settings: WebSettings) -> None:
    response.delete_cookie(COOKIE, path=cookie_path(settings), httponly=True, samesite="strict")
    response.delete_cookie(OLD_COOKIE, path="/")


def create_app(
    app: App,
    settings: WebSettings | None = None,
    *,
    no_auth: bool | None = None,
    metrics: bool | None = None,
    poll_seconds: float | None = None,
) -> Starlette:
    """The dashboard and API for `app`, served as `settings` say (the keywords override
    the matching settings). With `metrics`, GET /metrics serves the cluster-wide
    Prometheus metrics read from the database (needs a token with the read permission,
    like the API: Prometheus sends it with `authorization: credentials`)."""
    settings = settings or WebSettings()
    if no_auth is not None:
        settings = dataclasses.replace(settings, no_auth=no_auth)
    if metrics is not None:
        settings = dataclasses.replace(settings, metrics=metrics)
    if poll_seconds is not None:
        settings = dataclasses.replace(settings, poll_seconds=poll_seconds)
    root = settings.root_path
    api = build_api(settings, app.features.values())
    authenticate = Authenticator(app, no_auth=settings.no_auth)
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=jinja2.select_autoescape(["html"]),
        undefined=jinja2.StrictUndefined,
    )
    spec_cache: dict[str, Any] = {}

    async def openapi(request: Request) -> Response:
        try:
            principal = await run_in_threadpool(authenticate, request)
            principal.require(Permission.READ)
        except Exception as exc:
            return from_exception(exc, request)
        if "doc" not in spec_cache:
            spec_cache["doc"] = api.openapi()
        return JSONResponse(spec_cache["doc"])

    def login_page(
        request: Request, error: str | None, *, notice: str | None = None, status: int = 200
    ) -> Response:
        return _login(env, request, root, error, notice=notice, status=status)

    def page(entry: features.Page) -> Any:
        template = env.get_template(entry.template)

        async def render(request: Request) -> Response:
            if "token" in request.query_params:
                return await _token_in_url(request)
            principal = await run_in_threadpool(authenticate.page_principal, request)
            if principal is None:
                return login_page(request, None)
            context = _context(entry, principal, request)
            if entry.permission is not None and not principal.can(entry.permission):
                forbidden = env.get_template("forbidden.html")
                html = forbidden.render(**context, needs=str(entry.permission))
                return HTMLResponse(html, status_code=403)
            return HTMLResponse(template.render(**context))

        return render

    def _context(entry: features.Page, principal: Principal, request: Request) -> dict[str, Any]:
        return {
            "title": entry.title,
            "active": entry.path,
            "nav": [
                p
                for p in features.pages(app)
                if p.nav and (p.permission is None or principal.can(p.permission))
            ],
            "principal": principal,
            "no_auth": settings.no_auth,
            "poll_ms": int(settings.poll_seconds * 1000),
            "params": request.path_params,
            "version": __version__,
            "database": app.url.redacted(),
            "root": root,
        }

    async def _token_in_url(request: Request) -> Response:
        # A long-lived token must not travel in a link: it stays in the browser's history,
        # in proxy logs and Referer headers, and a link on another site would sign a user
        # into the attacker's token (login CSRF). So ?token= never signs in, whoever sent
        # the link: the token is not even looked at. The URL is cleaned at once, and the
        # sign-in page says what to do instead (paste it, or use a login link).
        rest = {k: v for k, v in request.query_params.items() if k != "token"}
        target = root + request.url.path + (f"?{urlencode(rest)}" if rest else "")
        if settings.no_auth:
            return RedirectResponse(target, status_code=303)
        query = urlencode({"notice": "token-in-url", "next": target})
        return RedirectResponse(f"{root}/login?{query}", status_code=303)

    def link_page(
        request: Request,
        *,
        name: str | None,
        role: str | None,
        code: str | None,
        problem: str | None,
        status: int,
    ) -> Response:
        html = env.get_template("link.html").render(
            title="Sign in",
            root=root,
            name=name,
            role=role,
            code=code,
            problem=problem,
            version=__version__,
        )
        headers = {"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"}
        return HTMLResponse(html, status_code=status, headers=headers)

    async def login_link(request: Request) -> Response:
        """GET /login/link?code=...: a navigation the user made (typed, pasted, opened
        from a terminal or an app: `Sec-Fetch-Site: none`, or from this dashboard) uses
        the link and signs in. Followed from another site's page, or from a browser that
        does not say, it only asks: the user sees whose session it would open and signs
        in with a click on this page (a same-origin request with the header)."""
        code = request.query_params.get("code", "")
        if settings.no_auth:
            return RedirectResponse(root + "/", status_code=303)
        fetched_by = request.headers.get("sec-fetch-site")
        if fetched_by in ("none", "same-origin"):
            try:
                secret, _ = await run_in_threadpool(
                    app.tokens.redeem_login_link, code, settings.session_seconds
                )
            except AuthenticationError as exc:
                return link_page(
                    request, name=None, role=None, code=None, problem=str(exc), status=410
                )
            redirect = RedirectResponse(root + "/", status_code=303)
            set_session(redirect, secret, request, settings)
            return redirect
        record = await run_in_threadpool(app.tokens.inspect_login_link, code)
        if record is None or record.used or record.expired or not record.token_live:
            return link_page(
                request,
                name=None,
                role=None,
                code=None,
                problem=link_problem(record),
                status=410,
            )
        return link_page(
            request, name=record.name, role=record.role, code=code, problem=None, status=200
        )

    render_metrics: Any = None
    if settings.metrics:
        from rota.observe.cluster import cluster_registry
        from rota.telemetry.prometheus import renderer

        render_metrics = renderer(cluster_registry(app.driver))

    async def prometheus(request: Request) -> Response:
        try:
            principal = await run_in_threadpool(authenticate, request)
            principal.require(Permission.READ)
        except Exception as exc:
            return from_exception(exc, request)
        body, content_type = await run_in_threadpool(
            render_metrics, request.headers.get("accept", "")
        )
        return Response(body, media_type=content_type)

    async def login_route(request: Request) -> Response:
        notice = NOTICES.get(request.query_params.get("notice", ""))
        return login_page(request, None, notice=notice)

    async def livez(request: Request) -> Response:
        # Liveness: the process answers. Never the database (that is /api/health, for
        # readiness): a restart would not bring a database back.
        return JSONResponse({"status": "ok"})

    async def not_found(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return from_exception(exc, request)
        return HTMLResponse(
            f"<h1>Not found</h1><p><a href='{root}/'>rota dashboard</a></p>", status_code=404
        )

    async def server_error(request: Request, exc: Exception) -> Response:
        return problem_response(500, "the server failed to answer; see its log")

    routes: list[BaseRoute] = [
        Route("/api/openapi.json", openapi, methods=["GET"]),
        *api.routes(app, authenticate),
        Route("/login", login_route, methods=["GET"]),
        Route("/login/link", login_link, methods=["GET"]),
        Route("/livez", livez, methods=["GET"]),
        *[Route(p.path, page(p), methods=["GET"]) for p in features.PAGES],
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if render_metrics is not None:
        routes.append(Route("/metrics", prometheus, methods=["GET"]))
    web = Starlette(
        routes=routes,
        middleware=[Middleware(Door, settings=settings)],
        exception_handlers={404: not_found, 405: not_found, 500: server_error},
    )
    web.state.api = api
    web.state.settings = settings
    return web


def local_next(value: str | None, root: str) -> str | None:
    """`next` if it is a path of this dashboard (never another site), else None."""
    if not value or not value.startswith(root + "/") or value.startswith("//"):
        return None
    if "\\" in value or any(ord(c) < 32 for c in value):
        return None
    return value


def _login(
    env: jinja2.Environment,
    request: Request,
    root: str,
    error: str | None,
    *,
    notice: str | None = None,
    status: int = 200,
) -> Response:
    if request.url.path == "/login":
        target = local_next(request.query_params.get("next"), root) or root + "/"
    else:
        query = f"?{request.url.query}" if request.url.query else ""
        target = root + request.url.path + query
    html = env.get_template("login.html").render(
        title="Sign in",
        error=error,
        notice=notice,
        next=target,
        version=__version__,
        root=root,
    )
    status = status if error is None else 401 if status == 200 else status
    return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})
