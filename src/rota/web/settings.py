"""WebSettings: how `rota dashboard` serves (which Host names, under which path prefix,
cookies, sessions, body limits), validated once, with errors that name the option to fix."""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass

from rota.errors import ConfigurationError

# The names a browser on this machine uses; a dashboard always answers to them.
LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
ANY_HOST = "*"
# A host name (RFC 1123 labels) or an IP address, as it appears in a Host header.
_HOSTNAME = re.compile(
    r"(?=.{1,253}$)([a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)(\.[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?)*\.?"
)
_ROOT_PATH = re.compile(r"(/[A-Za-z0-9._~-]+)+")

DEFAULT_SESSION_SECONDS = 8 * 3600.0
# The login endpoints take a token or a code: a few hundred bytes. Anything bigger is
# refused before it is read, so a stranger cannot make the server buffer megabytes.
LOGIN_BODY_BYTES = 4 * 1024
# Everything else (enqueue carries a task's arguments, up to the 1 MiB payload limit).
DEFAULT_MAX_BODY_BYTES = 2 * 1024 * 1024
# JSON nested deeper than this is refused before parsing (a 400, never a RecursionError).
MAX_JSON_DEPTH = 64


def normalize_host(host: str) -> str:
    """A Host value without its port, lower-case, IPv6 without brackets."""
    host = host.strip().lower()
    if host.startswith("["):
        return host[1 : host.find("]")] if "]" in host else host
    if host.count(":") == 1:
        host = host.partition(":")[0]
    return host


def check_host(value: str) -> str:
    """An --allowed-host value: a host name, an IP address, `.example.com` (that domain
    and every name under it) or `*` (any: only behind a proxy that checks Host)."""
    if value == ANY_HOST:
        return value
    host = normalize_host(value)
    bare = host[1:] if host.startswith(".") else host
    try:
        ipaddress.ip_address(bare)
        return host
    except ValueError:
        pass
    if not bare or not _HOSTNAME.fullmatch(bare):
        raise ConfigurationError(
            f"--allowed-host {value!r} is not a host name or IP address "
            "(e.g. ops.example.com, .example.com, 10.0.0.5, or * for any)"
        )
    return host.rstrip(".")


def check_root_path(value: str) -> str:
    """--root-path: '' or '/rota' style (no trailing slash)."""
    if value in ("", "/"):
        return ""
    stripped = value.rstrip("/")
    if not _ROOT_PATH.fullmatch(stripped):
        raise ConfigurationError(
            f"--root-path {value!r}: use a path such as /rota (letters, digits, . _ ~ -)"
        )
    return stripped


@dataclass(frozen=True)
class WebSettings:
    """How the dashboard and its API are served."""

    no_auth: bool = False
    # Host header values served besides the loopback names (`*`: any).
    allowed_hosts: tuple[str, ...] = ()
    # The path prefix the dashboard is served under behind a proxy, e.g. "/rota". The
    # proxy may pass the prefix on or strip it: both are served.
    root_path: str = ""
    # Always mark the session cookie Secure (else: only when the request, as the trusted
    # proxy reports it, came over https).
    secure_cookies: bool = False
    session_seconds: float = DEFAULT_SESSION_SECONDS
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    poll_seconds: float = 3.0
    metrics: bool = True

    def __post_init__(self) -> None:
        hosts = tuple(check_host(h) for h in self.allowed_hosts)
        object.__setattr__(self, "allowed_hosts", hosts)
        object.__setattr__(self, "root_path", check_root_path(self.root_path))
        if self.no_auth and ANY_HOST in hosts:
            raise ConfigurationError(
                "--no-auth with --allowed-host '*' would let any web site that resolves its "
                "name to this machine (DNS rebinding) drive the dashboard as admin: name "
                "the hosts, or create a token"
            )
        if not (math.isfinite(self.session_seconds) and 1 <= self.session_seconds <= 30 * 86400):
            raise ConfigurationError("--session-ttl must be between 1s and 30d")
        if not 1024 <= self.max_body_bytes <= 64 * 1024 * 1024:
            raise ConfigurationError("--max-body-bytes must be between 1 KiB and 64 MiB")
        if not 0.5 <= self.poll_seconds <= 60:
            raise ConfigurationError("--poll must be between 0.5 and 60 seconds")

    @property
    def any_host(self) -> bool:
        return ANY_HOST in self.allowed_hosts

    def host_allowed(self, host_header: str) -> bool:
        """Whether a request's Host header names this dashboard."""
        if self.any_host:
            return True
        host = normalize_host(host_header)
        if not host:
            return False
        if host in LOOPBACK_HOSTS:
            return True
        for allowed in self.allowed_hosts:
            if allowed.startswith("."):
                if host == allowed[1:] or host.endswith(allowed):
                    return True
            elif host == allowed:
                return True
        return False
