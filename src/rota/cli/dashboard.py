"""`rota dashboard`: the web dashboard and the HTTP JSON API, served by uvicorn."""

from __future__ import annotations

import click

from rota.auth.tokens import parse_duration
from rota.cli.common import app_options, fail, load_app, run_guarded
from rota.errors import ArgumentsError, ConfigurationError


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


@click.command()
@app_options
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
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
    "--poll",
    type=click.FloatRange(0.5, 60),
    default=3.0,
    show_default=True,
    help="Seconds between the pages' live refreshes.",
)
def dashboard(
    app_path: str | None,
    database_url: str | None,
    host: str,
    port: int,
    no_auth: bool,
    allowed_hosts: tuple[str, ...],
    session_ttl: float,
    max_body_bytes: int,
    poll: float,
) -> None:
    """Serve the dashboard and the API (/api, OpenAPI at /api/openapi.json).

    Sign in with a token from `rota tokens create NAME --role viewer`, or open
    http://HOST:PORT/?token=... once. Pass --app so the API can enqueue your tasks."""
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
            session_seconds=session_ttl,
            max_body_bytes=max_body_bytes,
            poll_seconds=poll,
        )
    except ConfigurationError as exc:
        fail(str(exc), code=2)
    app = load_app(app_path, database_url)
    # Refuse to serve a database that is unreachable or not migrated: one line, exit 1.
    run_guarded(app.check_schema)
    web = create_app(app, settings)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"rota dashboard on http://{shown}:{port}/" + ("  (no auth)" if no_auth else ""))
    try:
        uvicorn.run(web, host=host, port=port, log_level="warning", access_log=False)
    finally:
        app.close()
