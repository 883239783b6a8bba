"""Fixtures for the HTTP API and dashboard tests: an app with a failing task, one token
per role, and a Starlette TestClient over the real ASGI app."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from starlette.testclient import TestClient

import rota
from rota.web.server import create_app
from rota.web.settings import WebSettings

# Starlette's TestClient sends `Host: testserver`: the dashboard must be told to answer it.
TEST_HOST = WebSettings(allowed_hosts=("testserver",))


@dataclass
class Site:
    app: rota.App
    client: TestClient
    tokens: dict[str, str]

    def as_(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[role]}"}


def add_tasks(app: rota.App) -> None:
    @app.task(name="shop.charge", queue="payments", max_attempts=2)
    def charge(order: int, note: str = "") -> None:
        raise ValueError(f"card declined for order {order}")

    @app.task(name="shop.email", queue="mail")
    def email(to: str) -> str:
        return to


@pytest.fixture
def site(app: rota.App) -> Iterator[Site]:
    add_tasks(app)
    tokens = {role: app.tokens.create(f"t-{role}", role) for role in rota.auth.Role}
    with TestClient(create_app(app, TEST_HOST)) as client:
        yield Site(app=app, client=client, tokens={str(k): v for k, v in tokens.items()})
