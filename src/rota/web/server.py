"""The ASGI app of `rota dashboard`: the JSON API under /api, its OpenAPI document, the
dashboard pages (Jinja2 templates rendered once; their data comes from the API) and the
static files. `create_app(app)` builds it; `serve(...)` runs it with uvicorn."""

from __future__ import annotations

import importlib
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

import jinja2
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from rota import __version__
from rota.auth import Permission
from rota.errors import AuthenticationError, PermissionDeniedError
from rota.plugin import Feature
from rota.standard import standard_features
from rota.web import features
from rota.web.api import Api, Call
from rota.web.auth import COOKIE, CSRF_HEADER, Authenticator
from rota.web.models import MeOut, SessionBody
from rota.web.problems import from_exception, problem_response
from rota.web.routes import ROUTERS

if TYPE_CHECKING:
    from rota.standard import App

HERE = Path(__file__).parent
SESSION_DAYS = 7


def build_api(feature_set: Iterable[Feature] | None = None) -> Api:
    """The API of the engine and of `feature_set` (default: every standard feature)."""
    api = Api(title="rota", version=__version__)
    for register in ROUTERS:
        register(api)
    for feature in standard_features() if feature_set is None else feature_set:
        for reference in feature.routes:
            module_name, _, attribute = reference.partition(":")
            getattr(importlib.import_module(module_name), attribute)(api)
    _session_routes(api)
    return api


def _session_routes(api: Api) -> None:
    api.tags["session"] = "The dashboard's browser session (a token kept in a cookie)."

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
        """Check a token and keep it in an HttpOnly, SameSite=Strict cookie. Needs the
        X-Rota-Request header, so another site cannot sign a browser in (login CSRF)."""
        from rota.web.features import available

        _require_own_page(call.request)
        principal = call.app.tokens.authenticate(call.body.token)
        body = MeOut(
            name=principal.name,
            role=str(principal.role),
            permissions=sorted(str(p) for p in principal.permissions),
            features=available(call.app),
        )
        response = JSONResponse(body.model_dump(mode="json"))
        set_session(response, call.body.token, call.request)
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
        """Forget the session cookie."""
        _require_own_page(call.request)
        response = Response(status_code=204)
        response.delete_cookie(COOKIE, path="/")
        return response


def _require_own_page(request: Request) -> None:
    if request.headers.get(CSRF_HEADER) != "1":
        raise PermissionDeniedError(f"send the {CSRF_HEADER}: 1 header (the dashboard does)")


def set_session(response: Response, token: str, request: Request) -> None:
    response.set_cookie(
        COOKIE,
        token,
        max_age=SESSION_DAYS * 86400,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def create_app(
    app: App, *, no_auth: bool = False, metrics: bool = True, poll_seconds: float = 3.0
) -> Starlette:
    """The dashboard and API for `app`. With `metrics`, GET /metrics serves the
    cluster-wide Prometheus metrics read from the database (needs a token with the read
    permission, like the API: Prometheus sends it with `authorization: credentials`)."""
    api = build_api(app.features.values())
    authenticate = Authenticator(app, no_auth=no_auth)
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

    def page(entry: features.Page) -> Any:
        template = env.get_template(entry.template)

        async def render(request: Request) -> Response:
            token = request.query_params.get("token")
            if token and not no_auth:
                # ?token=... logs the browser in once; the URL is cleaned at once so the
                # secret does not stay in the history or in Referer headers.
                try:
                    await run_in_threadpool(app.tokens.authenticate, token)
                except AuthenticationError:
                    return _login(env, request, "That token is unknown or revoked.")
                rest = {k: v for k, v in request.query_params.items() if k != "token"}
                target = request.url.path + (f"?{urlencode(rest)}" if rest else "")
                redirect = RedirectResponse(target, status_code=303)
                set_session(redirect, token, request)
                return redirect
            principal = await run_in_threadpool(authenticate.page_principal, request)
            if principal is None:
                return _login(env, request, None)
            html = template.render(
                title=entry.title,
                active=entry.path,
                nav=[p for p in features.pages(app) if p.nav],
                principal=principal,
                no_auth=no_auth,
                poll_ms=int(poll_seconds * 1000),
                params=request.path_params,
                version=__version__,
                database=app.url.redacted(),
            )
            return HTMLResponse(html)

        return render

    render_metrics: Any = None
    if metrics:
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

    async def login_page(request: Request) -> Response:
        return _login(env, request, None)

    async def not_found(request: Request, exc: Exception) -> Response:
        if request.url.path.startswith("/api/"):
            return from_exception(exc, request)
        return HTMLResponse("<h1>Not found</h1><p><a href='/'>rota dashboard</a></p>", 404)

    async def server_error(request: Request, exc: Exception) -> Response:
        return problem_response(500, "the server failed to answer; see its log")

    routes: list[BaseRoute] = [
        Route("/api/openapi.json", openapi, methods=["GET"]),
        *api.routes(app, authenticate),
        Route("/login", login_page, methods=["GET"]),
        *[Route(p.path, page(p), methods=["GET"]) for p in features.PAGES],
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    if render_metrics is not None:
        routes.append(Route("/metrics", prometheus, methods=["GET"]))
    web = Starlette(
        routes=routes,
        exception_handlers={404: not_found, 405: not_found, 500: server_error},
    )
    web.state.api = api
    return web


def _login(env: jinja2.Environment, request: Request, error: str | None) -> Response:
    html = env.get_template("login.html").render(
        title="Sign in", error=error, next=request.url.path, version=__version__
    )
    return HTMLResponse(html, status_code=200 if error is None else 401)
