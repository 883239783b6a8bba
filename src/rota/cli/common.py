"""Shared CLI plumbing: loading the app, the common options and output helpers."""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TypeVar, cast

import click
from rich.console import Console
from rich.text import Text

from rota import app as engine
from rota.drivers.url import ENV_URL_FILE, DatabaseURL, from_file
from rota.drivers.url import parse as parse_url
from rota.errors import ConfigurationError, RotaError
from rota.standard import App

F = TypeVar("F", bound=Callable[..., Any])

console = Console()
# Errors and notices stay one line however long (log collectors split on newlines).
err_console = Console(stderr=True, soft_wrap=True)


def load_app(app_path: str | None, database_url: str | None, *, creates: bool = False) -> App:
    """`--app pkg.module:attr` imports the user's app; `--database-url` alone gives an
    app without tasks (enough to inspect and act on jobs). Only a command that `creates`
    the database or waits for it (migrate, worker, the servers) may be given a SQLite file
    that does not exist: for the others a typo in the path would make a new, empty one."""
    app = _load_app(app_path, database_url)
    if not creates:
        require_sqlite_file(app.url)
    return app


def require_sqlite_file(url: DatabaseURL, option: str = "--database-url") -> None:
    """Refuse a SQLite path that does not exist, instead of creating an empty file."""
    if url.dialect == "sqlite" and url.path and not os.path.exists(url.path):
        where = f"{option} or $ROTA_DATABASE_URL" if option == "--database-url" else option
        raise click.UsageError(
            f"no such file: {url.path} (check the path in {where}; "
            "`rota migrate` creates a new database)"
        )


def _load_app(app_path: str | None, database_url: str | None) -> App:
    app_path = app_path or os.environ.get("ROTA_APP")
    url: str | DatabaseURL | None = database_url
    if database_url:
        try:
            parse_url(database_url)
        except ConfigurationError as exc:
            raise click.BadParameter(str(exc), param_hint="--database-url") from None
    url_file = database_url_file()
    if url_file:
        if database_url:
            raise click.UsageError(
                "a database URL and a database URL file are both given (--database-url or "
                f"ROTA_DATABASE_URL, and --database-url-file or {ENV_URL_FILE}): keep one"
            )
        try:
            url = from_file(url_file)
        except ConfigurationError as exc:
            raise click.BadParameter(str(exc), param_hint="--database-url-file") from None
    if app_path:
        module_name, _, attr = app_path.partition(":")
        if not module_name or not attr:
            raise click.BadParameter(
                f"{app_path!r}: use the form package.module:attribute", param_hint="--app"
            )
        if os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # like `python -m`, find modules in the cwd
        saved_url = os.environ.get("ROTA_DATABASE_URL")
        if database_url:
            # A module doing `app = rota.App()` reads the URL at import: give it this one.
            os.environ["ROTA_DATABASE_URL"] = database_url
        try:
            module = importlib.import_module(module_name)
        except (ImportError, ConfigurationError) as exc:
            raise click.BadParameter(
                f"cannot import {module_name!r}: {exc}", param_hint="--app"
            ) from None
        finally:
            if saved_url is None:
                os.environ.pop("ROTA_DATABASE_URL", None)
            else:
                os.environ["ROTA_DATABASE_URL"] = saved_url
        app = getattr(module, attr, None)
        if not isinstance(app, engine.App):
            raise click.BadParameter(
                f"{module_name}:{attr} is {type(app).__name__}, not a rota.App", param_hint="--app"
            )
        if url:
            app = _rebind(app, url)
        # A bare engine App has the namespaces of the features plugged into it only.
        return cast(App, app)
    try:
        return App(url)
    except ConfigurationError as exc:
        raise click.UsageError(f"{exc} (or pass --app pkg.module:app)") from None


def database_url_file() -> str | None:
    """--database-url-file (kept in the click context), else $ROTA_DATABASE_URL_FILE."""
    ctx = click.get_current_context(silent=True)
    flag = ctx.meta.get(_URL_FILE_KEY) if ctx is not None else None
    return flag or os.environ.get(ENV_URL_FILE) or None


_URL_FILE_KEY = "rota.database_url_file"


def _remember_url_file(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        ctx.meta[_URL_FILE_KEY] = value


def _rebind(app: engine.App, url: str | DatabaseURL) -> engine.App:
    """Point the app at another database (`--app` plus `--database-url`). The same object
    is kept, so every registry (tasks, schedules, batches, workflows, sagas, events) and
    every module-level reference to it use the new database: a second App would give a
    task that uses its module's `app` a second driver, and on SQLite a second writer."""
    app.close()
    app.url = url if isinstance(url, DatabaseURL) else parse_url(url)
    for feature in app.features.values():
        feature.database_changed()
    return app


def app_options(func: F) -> F:
    func = click.option(
        "--database-url-file",
        expose_value=False,
        callback=_remember_url_file,
        help=(
            "Read the database URL from this file (a mounted secret), again on every "
            f"reconnect (default: ${ENV_URL_FILE})."
        ),
    )(func)
    func = click.option(
        "--database-url",
        envvar="ROTA_DATABASE_URL",
        help="sqlite:///file.db or postgresql://... (default: $ROTA_DATABASE_URL).",
    )(func)
    func = click.option(
        "--app", "app_path", envvar="ROTA_APP", help="Your app as package.module:attribute."
    )(func)
    return func


def json_option(func: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON.")(func)


def print_json(value: Any) -> None:
    click.echo(json.dumps(value, indent=2, default=str))


def fail(message: str, code: int = 1) -> None:
    # The message quotes user input: print it as text, not as rich markup.
    from rota.cli.table import visible

    err_console.print(Text.assemble(("error:", "red"), " ", visible(message)), highlight=False)
    sys.exit(code)


def run_guarded(func: Callable[[], Any]) -> Any:
    """Turn rota's errors into a one-line message and exit status 1."""
    try:
        return func()
    except RotaError as exc:
        fail(str(exc))
