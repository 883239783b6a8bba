"""`rota dashboard`: the web dashboard and the HTTP JSON API, served by uvicorn; and
`rota dashboard login-url`, a single-use sign-in link."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta

import click

from rota.auth.tokens import parse_duration
from rota.cli.common import app_options, fail, json_option, load_app, print_json, run_guarded
from rota.errors import ArgumentsError, ConfigurationError

# Where login-url's links point unless --url says otherwise.
DEFAULT_URL = "http://127.0.0.1:8765"


def _split_hosts(
    ctx: click.Context, param: click.Parameter, value: tuple[str, ...]
) -> tuple[str, ...]:
    # Given as a comma-separated list in $ROTA_DASHBOARD_ALLOWED_HOSTS, or repeated.
    return tuple(h.strip() for v in value for h in v.split(",") if h.strip())


def _duration(ctx: click.Context, param: click.Parameter, value: str) -> float:
    try:
        return parse_duration(value, f"--{param.name}".replace("_", "-"))
    except ArgumentsError as exc:
        raise click.BadParameter(str(exc)) from None


@click.group(invoke_without_command=True)
@app_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option(
    "--port",
    type=click.IntRange(0, 65535),
    default=8765,
    show_default=True,
    help="Port to serve on (0: any free port).",
)
@click.option(
    "--no-auth",
    is_flag=True,
    help="Serve without tokens, everyone as admin (only on a loopback --host).",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    envvar="ROTA_DASHBOARD_ALLOWED_HOSTS",
    callback=_split_hosts,
    help="A host name the dashboard is reached by (repeat; .example.com for a domain; * for "
    "any). Loopback names and a specific --host are always allowed; other Host headers "
    "get 400 (DNS rebinding).",
)
@click.option(
    "--session-ttl",
    default="8h",
    show_default=True,
    callback=_duration,
    help="How long a browser session lasts after signing in.",
)
@click.option(
    "--max-body-bytes",
    type=click.IntRange(1024, 64 * 1024 * 1024),
    default=2 * 1024 * 1024,
    show_default=True,
    help="Largest request body (enqueue and replays); sign-in takes 4 KiB at most.",
)
@click.option(
    "--root-path",
    envvar="ROTA_DASHBOARD_ROOT_PATH",
    default="",
    help="The path prefix the dashboard is served under behind a proxy, e.g. /rota (the "
    "proxy may pass the prefix on or strip it).",
)
@click.option(
    "--forwarded-allow-ips",
    envvar="ROTA_FORWARDED_ALLOW_IPS",
    default="127.0.0.1",
    show_default=True,
    help="Proxies (IPs or networks, comma-separated, or *) whose X-Forwarded-Proto and "
    "X-Forwarded-For are trusted: the scheme they report decides the cookie's Secure flag.",
)
@click.option(
    "--secure-cookies",
    is_flag=True,
    envvar="ROTA_DASHBOARD_SECURE_COOKIES",
    help="Always mark the session cookie Secure (behind a TLS proxy).",
)
@click.option(
    "--poll",
    type=click.FloatRange(0.5, 60),
    default=3.0,
    show_default=True,
    help="Seconds between the pages' live refreshes.",
)
@click.pass_context
def dashboard(
    ctx: click.Context,
    app_path: str | None,
    database_url: str | None,
    host: str,
    port: int,
    no_auth: bool,
    allowed_hosts: tuple[str, ...],
    session_ttl: float,
    max_body_bytes: int,
    root_path: str,
    forwarded_allow_ips: str,
    secure_cookies: bool,
    poll: float,
) -> None:
    """Serve the dashboard and the API (/api, OpenAPI at /api/openapi.json).

    Sign in with a token from `rota tokens create NAME --role viewer`, or open a link from
    `rota dashboard login-url --token-name NAME`. Pass --app so the API can enqueue your
    tasks. docs/dashboard.md says how to run it behind a TLS ingress under a path."""
    if ctx.invoked_subcommand is not None:
        return
    import uvicorn

    from rota.web.auth import check_no_auth
    from rota.web.server import create_app
    from rota.web.settings import WebSettings

    try:
        if no_auth:
            check_no_auth(host)
        # The address bound is a name the dashboard is reached by (unless a wildcard).
        bound = () if host in ("0.0.0.0", "::", "") else (host,)
        settings = WebSettings(
            no_auth=no_auth,
            allowed_hosts=(*bound, *allowed_hosts),
            root_path=root_path,
            secure_cookies=secure_cookies,
            session_seconds=session_ttl,
            max_body_bytes=max_body_bytes,
            poll_seconds=poll,
        )
    except ConfigurationError as exc:
        fail(str(exc), code=2)
    app = load_app(app_path, database_url, creates=True)
    # Refuse to serve a database that is unreachable or not migrated: one line, exit 1.
    run_guarded(app.check_schema)
    web = create_app(app, settings)
    shown = f"[{host}]" if ":" in host else host
    click.echo(
        f"rota dashboard on http://{shown}:{port}{settings.root_path}/"
        + ("  (no auth)" if no_auth else "")
    )
    try:
        uvicorn.run(
            web,
            host=host,
            port=port,
            log_level="warning",
            access_log=False,
            proxy_headers=True,
            forwarded_allow_ips=forwarded_allow_ips,
        )
    finally:
        app.close()


@dashboard.command("login-url")
@app_options
@click.option("--token-name", required=True, help="The live token the link signs in as.")
@click.option(
    "--expires",
    default="10m",
    show_default=True,
    help="How long the link may be used (at most 1d); it signs in once.",
)
@click.option(
    "--url",
    "base_url",
    envvar="ROTA_DASHBOARD_URL",
    help=f"The dashboard's address as users reach it, with its path prefix, e.g. "
    f"https://ops.example.com/rota (default: {DEFAULT_URL} and $ROTA_DASHBOARD_ROOT_PATH).",
)
@json_option
def login_url(
    app_path: str | None,
    database_url: str | None,
    token_name: str,
    expires: str,
    base_url: str | None,
    as_json: bool,
) -> None:
    """Print a single-use, short-lived sign-in link for the token NAME. Opened by its
    user, it signs the browser in to a session of its own; the link carries no token,
    and a used or expired link signs no one in."""
    try:
        seconds = parse_duration(expires, "--expires")
    except ArgumentsError as exc:
        raise click.BadParameter(str(exc), param_hint="--expires") from None
    base = (base_url or DEFAULT_URL + os.environ.get("ROTA_DASHBOARD_ROOT_PATH", "")).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise click.BadParameter(
            f"{base!r}: give the dashboard's http(s) address", param_hint="--url"
        )
    app = load_app(app_path, database_url)
    try:
        code: str = run_guarded(lambda: app.tokens.create_login_link(token_name, expires=seconds))
    finally:
        app.close()
    link = f"{base}/login/link?code={code}"
    until = datetime.now(UTC) + timedelta(seconds=seconds)
    if as_json:
        print_json({"url": link, "token_name": token_name, "expires_at": until.isoformat()})
        return
    click.echo(link)
    click.echo(f"signs in once as {token_name}, until {until:%Y-%m-%d %H:%M:%S} UTC", err=True)
