"""The encryption feature: arguments of `@app.task(encrypted=True)` are sealed at enqueue
under $ROTA_ENCRYPTION_KEYS and opened only by the worker that runs the job."""

from __future__ import annotations

from typing import Any, ClassVar

from rota.app import App
from rota.plugin import Feature
from rota.security.encryption import keyring_from_env, open_sealed


class KeyringSealer:
    """Seals with the current key of the environment's keyring; opens with any of its keys."""

    def seal(self, args_json: str) -> str:
        return keyring_from_env().seal(args_json)

    def open(self, args: dict[str, Any]) -> dict[str, Any]:
        return open_sealed(args)


class EncryptionFeature(Feature):
    name: ClassVar[str] = "encryption"

    def attach(self, app: App) -> None:
        super().attach(app)
        app.sealer = KeyringSealer()
