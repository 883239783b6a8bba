"""schemathesis generates requests from the OpenAPI document and sends them to the real
ASGI app: no input may produce a 500, and every answer must match the document."""

from __future__ import annotations

from pathlib import Path

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

import rota
from rota.web.server import create_app
from tests.web.conftest import TEST_HOST, add_tasks
from tests.web.features_demo import seed_features

HEADERS: dict[str, str] = {}


def _site(path: Path) -> tuple[rota.App, object]:
    app = rota.App(f"sqlite:///{path}")
    app.migrate()
    add_tasks(app)
    seed_features(app)
    app.schedule("shop.email", "0 3 * * *", name="nightly", args={"to": "ops"})
    app.sync_schedules()
    for order in range(3):
        app.enqueue("shop.charge", {"order": order}, key=f"order-{order}")
    # A long random name: the fuzzer's DELETE /api/tokens/{name} cannot guess it.
    HEADERS["Authorization"] = "Bearer " + app.tokens.create("fuzz-admin-5f0c9e1d7a", "admin")
    return app, create_app(app, TEST_HOST)


def test_no_input_makes_a_server_error(tmp_path: Path) -> None:
    app, web = _site(tmp_path / "rota.db")
    try:
        schema = schemathesis.openapi.from_asgi("/api/openapi.json", web, headers=HEADERS)
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) >= 20
        statuses: list[int] = []
        for operation in operations:

            @given(case=operation.as_strategy())
            @settings(
                max_examples=25,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                derandomize=True,
                database=None,
            )
            def check(case: schemathesis.Case) -> None:
                response = case.call(headers=HEADERS)
                statuses.append(response.status_code)
                assert response.status_code < 500, (
                    case.method,
                    case.formatted_path,
                    response.text,
                )
                case.validate_response(
                    response,
                    checks=[
                        status_code_conformance,
                        content_type_conformance,
                        response_schema_conformance,
                    ],
                )

            check()
        # The fuzzer really ran: many calls, both accepted and refused inputs.
        assert len(statuses) > 5 * len(operations), len(statuses)
        assert {200, 422} <= set(statuses), sorted(set(statuses))
    finally:
        app.close()
