"""Parse database URLs into a dialect and its connection settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from rota.errors import ConfigurationError

# journal_mode is not an option: workers in several processes need WAL.
_SQLITE_OPTIONS = {"synchronous", "busy_timeout"}


@dataclass(frozen=True)
class DatabaseURL:
    dialect: str  # "sqlite" | "postgres"
    raw: str
    path: str = ""  # sqlite file
    options: dict[str, str] = field(default_factory=dict)

    def redacted(self) -> str:
        """The URL with any password replaced, safe for logs and errors."""
        parts = urlsplit(self.raw)
        if parts.password:
            netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
            return parts._replace(netloc=netloc).geturl()
        return self.raw


def parse(url: str) -> DatabaseURL:
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(
            "no database URL: pass App(url) or set ROTA_DATABASE_URL "
            "(sqlite:///path/to/rota.db or postgresql://user@host/db)"
        )
    url = url.strip()
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme == "sqlite":
        parts = urlsplit(url)
        # sqlite:///relative.db -> "relative.db"; sqlite:////abs/path.db -> "/abs/path.db"
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if parts.netloc:
            raise ConfigurationError(
                f"bad SQLite URL {url!r}: use sqlite:///relative/path.db or sqlite:////abs/path.db"
            )
        if not path or path == ":memory:":
            raise ConfigurationError(
                f"bad SQLite URL {url!r}: rota needs a file (workers share it), "
                "e.g. sqlite:///rota.db"
            )
        options = dict(parse_qsl(parts.query))
        unknown = set(options) - _SQLITE_OPTIONS
        if unknown:
            raise ConfigurationError(
                f"unknown SQLite URL option(s) {sorted(unknown)}; known: {sorted(_SQLITE_OPTIONS)}"
            )
        if Path(path).is_dir():
            raise ConfigurationError(f"bad SQLite URL {url!r}: {path} is a directory")
        return DatabaseURL("sqlite", url, path=path, options=options)
    if scheme in ("postgresql", "postgres"):
        parts = urlsplit(url)
        if parts.port is None and ":" in parts.netloc.rsplit("@", 1)[-1]:
            raise ConfigurationError(f"bad PostgreSQL URL: the port in {parts.netloc!r} is empty")
        return DatabaseURL("postgres", url)
    shown = DatabaseURL("?", url).redacted()
    raise ConfigurationError(
        f"unsupported database URL {shown!r}: use sqlite:///file.db or postgresql://host/db"
    )
