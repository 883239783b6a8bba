"""Encryption at rest for the arguments of `@app.task(encrypted=True)`: Fernet
(AES-128-CBC with HMAC-SHA256, from the `cryptography` package) under keys from
$ROTA_ENCRYPTION_KEYS, the first of which seals and all of which open (key rotation)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rota.errors import ConfigurationError
from rota.job import SEALED_MARK
from rota.security.store import SealedArgsStore

if TYPE_CHECKING:
    from rota.drivers.base import Driver

ENV_KEYS = "ROTA_ENCRYPTION_KEYS"
ENVELOPE_VERSION = 1


def generate_key() -> str:
    """A new random key in the form ROTA_ENCRYPTION_KEYS takes."""
    # cryptography (about 10 MB of memory) loads when a key is first used, not with every
    # process that imports rota.
    from cryptography.fernet import Fernet

    return Fernet.generate_key().decode()


def fingerprint(key: str) -> str:
    """A short, one-way name for a key: stored beside the ciphertext so a reader can
    tell which key sealed it without the key itself ever being stored or logged."""
    return hashlib.sha256(key.encode()).hexdigest()[:12]


class Keyring:
    """The configured keys: the first seals, every one opens."""

    def __init__(self, keys: Sequence[str]) -> None:
        from cryptography.fernet import Fernet, MultiFernet

        cleaned = [k.strip() for k in keys if k.strip()]
        if not cleaned:
            raise ConfigurationError(
                f"no encryption key: set {ENV_KEYS} to one or more keys, comma-separated, "
                "the current one first (make one with `rota db generate-key`)"
            )
        fernets = []
        for i, key in enumerate(cleaned, start=1):
            try:
                fernets.append(Fernet(key))
            except (ValueError, TypeError):
                # Name the position, never the value: the value is a secret.
                raise ConfigurationError(
                    f"key {i} of {ENV_KEYS} is not a valid key (32 url-safe base64-encoded "
                    "bytes; make one with `rota db generate-key`)"
                ) from None
        self._multi = MultiFernet(fernets)
        self.current = fingerprint(cleaned[0])
        self.known = tuple(fingerprint(k) for k in cleaned)

    def __repr__(self) -> str:
        return f"<Keyring current={self.current} keys={len(self.known)}>"

    def seal(self, args_json: str) -> str:
        """The JSON object stored in place of `args_json`."""
        token = self._multi.encrypt(args_json.encode()).decode()
        return json.dumps({SEALED_MARK: ENVELOPE_VERSION, "key": self.current, "data": token})

    def open(self, sealed: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments inside a sealed object; ConfigurationError when no key opens it."""
        token = sealed.get("data")
        if sealed.get(SEALED_MARK) != ENVELOPE_VERSION or not isinstance(token, str):
            raise ConfigurationError("the stored arguments are not a rota sealed object")
        from cryptography.fernet import InvalidToken

        try:
            plain = self._multi.decrypt(token.encode())
        except InvalidToken:
            raise ConfigurationError(
                f"cannot decrypt the arguments (sealed with key {sealed.get('key')!r}): none "
                f"of the {len(self.known)} key(s) in {ENV_KEYS} opens them; add the old key "
                "after the current one"
            ) from None
        value = json.loads(plain)
        if not isinstance(value, dict):
            raise ConfigurationError("the decrypted arguments are not a JSON object")
        return value

    def reseal(self, sealed: Mapping[str, Any]) -> str | None:
        """`sealed` under the current key, or None when it already is."""
        if sealed.get("key") == self.current:
            return None
        return self.seal(json.dumps(self.open(sealed)))


_cache: dict[str, Keyring] = {}


def keyring_from_env(environ: Mapping[str, str] | None = None) -> Keyring:
    """The keyring from $ROTA_ENCRYPTION_KEYS (parsed once per distinct value)."""
    raw = (os.environ if environ is None else environ).get(ENV_KEYS, "")
    ring = _cache.get(raw)
    if ring is None:
        ring = Keyring(raw.split(","))
        _cache.clear()  # one value in force at a time; keep no stale keys around
        _cache[raw] = ring
    return ring


def is_sealed(args: Mapping[str, Any]) -> bool:
    return SEALED_MARK in args


@dataclass(frozen=True)
class RotationReport:
    """What `rota db rotate-key` did."""

    resealed: int = 0  # re-encrypted under the current key
    current: int = 0  # already under the current key
    unreadable: int = 0  # no configured key opens them (left as they are)
    changed: int = 0  # changed by someone else meanwhile (left; run again)

    def to_json(self) -> dict[str, int]:
        return {
            "resealed": self.resealed,
            "current": self.current,
            "unreadable": self.unreadable,
            "changed": self.changed,
        }


def rotate_stored(
    driver: Driver,
    ring: Keyring,
    *,
    batch: int = 500,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> RotationReport:
    """Re-encrypt every stored sealed argument object (jobs and schedule templates)
    under the current key. Each row is swapped only if unchanged since it was read, so
    it is safe beside running workers; old keys stay needed until this reports 0
    unreadable and 0 changed. `progress(kind, rows examined, None)` follows each page."""
    counts = {"resealed": 0, "current": 0, "unreadable": 0, "changed": 0}
    store = SealedArgsStore(driver)
    for kind in ("job", "schedule"):
        after, seen = 0, 0
        while True:
            rows = store.scan(kind, after, batch)
            if progress is not None:
                seen += len(rows)
                progress(f"{kind}s", seen, None)
            if not rows:
                break
            for row in rows:
                after = row.id
                try:
                    fresh = ring.reseal(json.loads(row.args_json))
                except ConfigurationError:
                    counts["unreadable"] += 1
                    continue
                if fresh is None:
                    counts["current"] += 1
                elif store.swap(kind, row.id, row.args_json, fresh):
                    counts["resealed"] += 1
                else:
                    counts["changed"] += 1
    return RotationReport(**counts)


def open_sealed(sealed: Mapping[str, Any]) -> dict[str, Any]:
    """Decrypt stored arguments with the keys in the environment (the worker's side)."""
    return keyring_from_env().open(sealed)
