"""`rota dashboard`: the web dashboard and the HTTP JSON API, served by uvicorn."""

from __future__ import annotations

import click

from rota.cli.common import app_options, fail, load_app, run_guarded
from rota.errors import ConfigurationError


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
    poll: float,
) -> None:
    """Serve the dashboard and the API (/api, OpenAPI at /api/openapi.json).

    Sign in with a token from `rota tokens create NAME --role viewer`, or open
    http://HOST:PORT/?token=... once. Pass --app so the API can enqueue your tasks."""
    import uvicorn

    from rota.web.auth import check_no_auth
    from rota.web.server import create_app

    if no_auth:
        try:
            check_no_auth(host)
        except ConfigurationError as exc:
            fail(str(exc), code=2)
    app = load_app(app_path, database_url)
    # Refuse to serve a database that is unreachable or not migrated: one line, exit 1.
    run_guarded(app.check_schema)
    web = create_app(app, no_auth=no_auth, poll_seconds=poll)
    shown = f"[{host}]" if ":" in host else host
    click.echo(f"rota dashboard on http://{shown}:{port}/" + ("  (no auth)" if no_auth else ""))
    try:
        uvicorn.run(web, host=host, port=port, log_level="warning", access_log=False)
    finally:
        app.close()
