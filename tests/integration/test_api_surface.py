"""The consistent surface of the Python API (#19): one NotFoundError base, the schedules
namespace with the flat delegates, app.migrate() storing @app.cron schedules."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import rota


def test_every_not_found_error_shares_one_base(app: rota.App) -> None:
    lookups: list[tuple[Callable[[], Any], type[rota.RotaError]]] = [
        (lambda: app.cancel_job(987_654), rota.JobNotFoundError),
        (lambda: app.schedules.get_stored("no-such-schedule"), rota.ScheduleNotFoundError),
        (lambda: app.batches.get("no-such-batch"), rota.BatchNotFoundError),
        (lambda: app.workflows.get("no-such-workflow"), rota.WorkflowNotFoundError),
        (lambda: app.sagas.get("no-such-saga"), rota.SagaNotFoundError),
    ]
    for lookup, specific in lookups:
        with pytest.raises(rota.NotFoundError) as caught:
            lookup()
        assert isinstance(caught.value, specific)
    # The saga's error is still a SagaError for code that caught that before.
    assert issubclass(rota.SagaNotFoundError, rota.SagaError)
    assert "NotFoundError" in rota.__all__
