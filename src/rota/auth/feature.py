"""The tokens feature: API tokens with roles for the HTTP API (`app.tokens`) and
`rota tokens`."""

from __future__ import annotations

import functools
from typing import ClassVar

from rota.auth.tokens import TokenRegistry
from rota.plugin import Feature


class TokensFeature(Feature):
    name: ClassVar[str] = "tokens"
    commands: ClassVar[tuple[str, ...]] = ("rota.cli.tokens:tokens",)
    routes: ClassVar[tuple[str, ...]] = ("rota.web.routes.tokens:register",)

    @functools.cached_property
    def api(self) -> TokenRegistry:
        return TokenRegistry(self.app)
