"""Parse database URLs into a dialect and its connection settings; read them from a
secret file (re-read on every new connection), and keep their secrets out of text."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

from rota.errors import ConfigurationError

# journal_mode is not an option: workers in several processes need WAL.
_SQLITE_OPTIONS = {"synchronous", "busy_timeout"}
# Query parameters of a PostgreSQL URL whose values are secrets.
_SECRET_PARAMS = {"password", "sslpassword"}
ENV_URL = "ROTA_DATABASE_URL"
ENV_URL_FILE = "ROTA_DATABASE_URL_FILE"
MASK = "***"
log = logging.getLogger("rota.config")


@dataclass(frozen=True)
class DatabaseURL:
    dialect: str  # "sqlite" | "postgres"
    raw: str
    path: str = ""  # sqlite file
    options: dict[str, str] = field(default_factory=dict)
    # Where the URL came from when it was read from a file (a Kubernetes Secret mount):
    # new connections read it again, so a rotated password is picked up on reconnect.
    file: str | None = None

    def __repr__(self) -> str:
        return f"DatabaseURL({self.redacted()!r})"

    def redacted(self) -> str:
        """The URL with any password replaced, safe for logs and errors."""
        return redact(self.raw)

    def scrub(self, text: str) -> str:
        """`text` with this URL's secrets masked (for messages that quote a driver's
        error, which may echo the connection string)."""
        return scrub(text, self.raw)

    def current(self) -> str:
        """The URL to connect with now: the file's content when it came from a file."""
        if self.file is None:
            return self.raw
        try:
            text = Path(self.file).read_text(encoding="utf-8").strip()
        except OSError as exc:
            log.warning("cannot read %s (%s); using the URL read before", self.file, exc.strerror)
            return self.raw
        if not text:
            # A Secret being rewritten can be empty for a moment: keep the last URL.
            log.warning("%s is empty; using the URL read before", self.file)
            return self.raw
        return text


def _secrets(url: str) -> list[str]:
    parts = urlsplit(url)
    found: list[str] = []
    try:
        password = parts.password
    except ValueError:
        password = None
    if password:
        found += [password, unquote(password)]
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key.lower() in _SECRET_PARAMS and value:
            found.append(value)
    return sorted({s for s in found if s}, key=len, reverse=True)


def redact(url: str) -> str:
    """`url` with its password (in the authority or the query) replaced by ***."""
    parts = urlsplit(url)
    changed = False
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, host = netloc.rpartition("@")
        if ":" in userinfo:
            user = userinfo.split(":", 1)[0]
            netloc = f"{user}:{MASK}@{host}"
            changed = True
    query = parts.query
    pairs = parse_qsl(query, keep_blank_values=True)
    if any(k.lower() in _SECRET_PARAMS for k, _ in pairs):
        query = urlencode([(k, MASK if k.lower() in _SECRET_PARAMS else v) for k, v in pairs])
        changed = True
    return parts._replace(netloc=netloc, query=query).geturl() if changed else url


def scrub(text: str, url: str) -> str:
    """`text` with every secret of `url` (and the raw URL itself) masked."""
    text = text.replace(url, redact(url))
    for secret in _secrets(url):
        text = text.replace(secret, MASK)
    return text


def from_file(path: str | os.PathLike[str]) -> DatabaseURL:
    """The URL stored in a file (e.g. a mounted Kubernetes Secret), re-read on reconnect."""
    name = os.fspath(path)
    try:
        text = Path(name).read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise ConfigurationError(
            f"cannot read the database URL file {name!r}: {exc.strerror}"
        ) from None
    if not text:
        raise ConfigurationError(f"the database URL file {name!r} is empty")
    parsed = parse(text)
    if parsed.dialect != "postgres":
        return parsed  # a SQLite path needs no re-reading
    return DatabaseURL(parsed.dialect, parsed.raw, parsed.path, parsed.options, file=name)


def from_environment(environ: dict[str, str] | None = None) -> DatabaseURL:
    """$ROTA_DATABASE_URL, or the file named by $ROTA_DATABASE_URL_FILE (one, not both)."""
    env = os.environ if environ is None else environ
    url, file = env.get(ENV_URL, "").strip(), env.get(ENV_URL_FILE, "").strip()
    if url and file:
        raise ConfigurationError(
            f"both {ENV_URL} and {ENV_URL_FILE} are set: keep one (the file for a mounted secret)"
        )
    if file:
        return from_file(file)
    return parse(url)


def parse(url: str | DatabaseURL) -> DatabaseURL:
    if isinstance(url, DatabaseURL):
        return url
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(
            "no database URL: pass App(url), or set ROTA_DATABASE_URL or "
            "ROTA_DATABASE_URL_FILE (sqlite:///path/to/rota.db or postgresql://user@host/db)"
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
            shown = urlsplit(redact(url)).netloc
            raise ConfigurationError(f"bad PostgreSQL URL: the port in {shown!r} is empty")
        return DatabaseURL("postgres", url)
    shown = DatabaseURL("?", url).redacted()
    raise ConfigurationError(
        f"unsupported database URL {shown!r}: use sqlite:///file.db or postgresql://host/db"
    )


class SecretFilter(logging.Filter):
    """Masks a URL's secrets in the records of a library logger (psycopg's pool logs
    connection errors, and libpq quotes a malformed connection string in them)."""

    def __init__(self, url: DatabaseURL) -> None:
        super().__init__()
        self.url = url

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = scrub(message, self.url.raw)
        if self.url.file is not None:
            cleaned = scrub(cleaned, self.url.current())
        if cleaned != message:
            record.msg, record.args = cleaned, None
        return True
