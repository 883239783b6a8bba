"""The tenants feature: `app.tenants` (fair queues, per-tenant caps) and `rota tenants`."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import ClassVar

from rota.plugin import Feature
from rota.tenants.api import Tenants


class TenantsFeature(Feature):
    name: ClassVar[str] = "tenants"
    claims: ClassVar[Mapping[str, str]] = {"fair": "job_claim_fair"}
    commands: ClassVar[tuple[str, ...]] = ("rota.cli.tenants:tenants",)

    @functools.cached_property
    def api(self) -> Tenants:
        return Tenants(self.app)
