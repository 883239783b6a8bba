"""API tokens: random secrets shown once, stored as SHA-256 digests with a role and an
optional lifetime. The dashboard's browser sessions and single-use login links are
secrets of their own that stand for a token, stored the same way."""

from __future__ import annotations

import builtins
import hashlib
import logging
import math
import re
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from rota.auth.roles import Principal, Role
from rota.auth.store import TokenStore
from rota.drivers.base import LoginLinkRecord, TokenRecord
from rota.errors import ArgumentsError, AuthenticationError, RotaError

if TYPE_CHECKING:
    from rota.app import App

log = logging.getLogger("rota.auth")

TOKEN_PREFIX = "rota_"
# Session and link secrets have prefixes of their own, so neither works as a bearer token.
SESSION_PREFIX = "rotasess_"
LINK_PREFIX = "rotalink_"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@-]{0,63}$")
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(s|m|h|d|w)?\s*$")
_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 7 * 86400.0}
MAX_TOKEN_SECONDS = 10 * 365 * 86400.0
MAX_LINK_SECONDS = 86400.0


def digest(token: str) -> str:
    # Tokens carry 256 bits of randomness: a plain hash is enough (no slow KDF needed).
    return hashlib.sha256(token.encode()).hexdigest()


def parse_duration(value: str | float | timedelta, what: str = "a lifetime") -> float:
    """`90`, `90s`, `10m`, `12h`, `30d`, `2w` (or seconds, or a timedelta) -> seconds."""
    if isinstance(value, timedelta):
        seconds = value.total_seconds()
    elif isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and (match := _DURATION.match(value)):
        seconds = float(match[1]) * _UNITS[match[2] or "s"]
    else:
        raise ArgumentsError(f"{what} {value!r}: use a duration such as 90s, 10m, 12h, 30d or 2w")
    if not math.isfinite(seconds) or seconds <= 0:
        raise ArgumentsError(f"{what} must be longer than zero, not {value!r}")
    return seconds


class TokenRegistry:
    """`app.tokens`: create, list, revoke and check API tokens; open and end the
    dashboard's browser sessions; make and redeem login links."""

    def __init__(self, app: App) -> None:
        self._app = app
        self._touch_warned = False

    @property
    def _store(self) -> TokenStore:
        return TokenStore(self._app.driver)

    def create(
        self, name: str, role: Role | str, *, expires: str | float | timedelta | None = None
    ) -> str:
        """A new token for `name` with `role`, valid for `expires` (a duration such as
        "30d"; None: until revoked). The secret is returned once, never stored."""
        if not isinstance(name, str) or not _NAME.match(name):
            raise ArgumentsError(
                f"a token name is 1-64 characters: letters, digits and _ . : @ - (got {name!r})"
            )
        try:
            parsed = Role(role)
        except ValueError:
            roles = ", ".join(r.value for r in Role)
            raise ArgumentsError(f"unknown role {role!r}: one of {roles}") from None
        seconds = None if expires is None else parse_duration(expires, "--expires")
        if seconds is not None and seconds > MAX_TOKEN_SECONDS:
            raise ArgumentsError("--expires: at most 10 years (leave it out: until revoked)")
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        if not self._store.insert(name, digest(token), parsed.value, seconds):
            raise ArgumentsError(f"a token named {name!r} exists already; revoke it first")
        return token

    def list(self) -> builtins.list[TokenRecord]:
        records: builtins.list[TokenRecord] = self._store.all()
        return records

    def revoke(self, name: str) -> bool:
        """Revoke the token called `name` (its sessions end with it); False when no live
        token has that name."""
        return bool(self._store.revoke(name))

    def authenticate(self, token: str | None) -> Principal:
        """The principal a bearer token stands for; AuthenticationError if none (unknown,
        revoked or expired). Records the use (at most once a minute)."""
        if not token or not isinstance(token, str) or not token.startswith(TOKEN_PREFIX):
            raise AuthenticationError("missing or malformed API token")
        key = digest(token)
        record: TokenRecord | None = self._store.find(key)
        if record is None or record.revoked_at is not None:
            raise AuthenticationError("unknown or revoked API token")
        if record.expired:
            raise AuthenticationError(
                f"API token {record.name!r} expired: create a new one with "
                f"`rota tokens create {record.name} --role {record.role} --expires 30d` "
                "after revoking it"
            )
        if record.stale:
            self._touch(key)
        return Principal(name=record.name, role=Role(record.role), via="token")

    def _touch(self, key: str) -> None:
        # "Last used" is for the operator's eyes: a database role that may not write it
        # (a read-only dashboard on an old grant) must not lock anyone out.
        try:
            self._store.touch(key)
        except RotaError as exc:
            if not self._touch_warned:
                self._touch_warned = True
                log.warning("cannot record when API tokens were last used: %s", exc)

    # --- browser sessions ------------------------------------------------------------

    def start_session(self, token: str, seconds: float) -> tuple[str, Principal]:
        """Check `token` and open a browser session for it; returns the session secret
        (for the cookie) and the principal."""
        principal = self.authenticate(token)
        return self._open(digest(token), seconds), principal

    def _open(self, token_digest: str, seconds: float) -> str:
        secret = SESSION_PREFIX + secrets.token_urlsafe(32)
        self._store.prune()
        self._store.session_insert(digest(secret), token_digest, seconds)
        return secret

    def session(self, secret: str | None) -> Principal:
        """The principal of a live session: AuthenticationError when the session ended
        or expired, or its token was revoked or expired."""
        if not secret or not isinstance(secret, str) or not secret.startswith(SESSION_PREFIX):
            raise AuthenticationError("no session: sign in")
        found: tuple[TokenRecord, str] | None = self._store.session_find(digest(secret))
        if found is None:
            raise AuthenticationError("the session ended or expired: sign in again")
        record, token_digest = found
        if record.stale:
            self._touch(token_digest)
        return Principal(name=record.name, role=Role(record.role), via="token")

    def end_session(self, secret: str | None) -> bool:
        """Sign out: the session ends on the server at once."""
        if not secret or not secret.startswith(SESSION_PREFIX):
            return False
        return bool(self._store.session_end(digest(secret)))

    # --- login links -----------------------------------------------------------------

    def create_login_link(self, name: str, *, expires: str | float | timedelta = "10m") -> str:
        """A single-use code that signs a browser in as the live token `name`, within
        `expires` (at most a day). Only its digest is stored."""
        seconds = parse_duration(expires, "--expires")
        if seconds > MAX_LINK_SECONDS:
            raise ArgumentsError("--expires: a login link lives at most 1d (use 10m)")
        code = LINK_PREFIX + secrets.token_urlsafe(32)
        self._store.prune()
        if not self._store.link_insert(digest(code), name, seconds):
            raise ArgumentsError(
                f"no live token named {name!r}: see `rota tokens ls`, or create one with "
                f"`rota tokens create {name} --role viewer`"
            )
        return code

    def inspect_login_link(self, code: str | None) -> LoginLinkRecord | None:
        """A link's state without using it (None: unknown)."""
        if not code or not isinstance(code, str) or not code.startswith(LINK_PREFIX):
            return None
        record: LoginLinkRecord | None = self._store.link_find(digest(code))
        return record

    def redeem_login_link(self, code: str | None, seconds: float) -> tuple[str, Principal]:
        """Use a link once: a new session for its token, or AuthenticationError saying
        why not (used, expired, unknown, or its token is gone)."""
        if not code or not isinstance(code, str) or not code.startswith(LINK_PREFIX):
            raise AuthenticationError("this sign-in link is not one rota made")
        key = digest(code)
        token_digest: str | None = self._store.link_redeem(key)
        if token_digest is None:
            record: LoginLinkRecord | None = self._store.link_find(key)
            raise AuthenticationError(link_problem(record))
        record_now: TokenRecord | None = self._store.find(token_digest)
        if record_now is None or record_now.revoked_at is not None or record_now.expired:
            raise AuthenticationError("the token this link stands for was revoked or expired")
        principal = Principal(name=record_now.name, role=Role(record_now.role), via="token")
        return self._open(token_digest, seconds), principal


def link_problem(record: LoginLinkRecord | None) -> str:
    """Why a login link cannot sign anyone in, in words for the page."""
    if record is None:
        return "this sign-in link is unknown"
    if record.used:
        return "this sign-in link was used already: each link signs in once"
    if record.expired:
        return "this sign-in link has expired"
    if not record.token_live:
        return "the token this link stands for was revoked or expired"
    return "this sign-in link cannot be used"
