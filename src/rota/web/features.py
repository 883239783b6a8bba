"""Optional sections: a section shows in the dashboard when the feature behind it is
plugged into the app (dead letters: the operations feature; batches, workflows, sagas).
Adding one is a router module named in the feature's `routes`, a Page here and a
template."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rota.auth import Permission

if TYPE_CHECKING:
    from rota.standard import App


@dataclass(frozen=True)
class Page:
    """A dashboard page: its path, template, title in the navigation, the app namespace
    it needs (None: always shown) and the permission it needs beyond `read` (a caller
    without it sees neither the page nor its entry in the navigation)."""

    path: str
    template: str
    title: str
    nav: bool = True
    feature: str | None = None
    permission: Permission | None = None


PAGES: list[Page] = [
    Page("/", "overview.html", "Overview"),
    Page("/jobs", "jobs.html", "Jobs"),
    Page("/jobs/{job_id:int}", "job.html", "Job", nav=False),
    Page(
        "/dead-letters",
        "dead_letters.html",
        "Dead letters",
        feature="dlq",
        permission=Permission.DLQ_READ,
    ),
    Page("/schedules", "schedules.html", "Schedules"),
    Page("/schedules/{name}", "schedule.html", "Schedule", nav=False),
    Page("/batches", "batches.html", "Batches", feature="batches"),
    Page("/batches/{ref}", "batch.html", "Batch", nav=False, feature="batches"),
    Page("/workflows", "workflows.html", "Workflows", feature="workflows"),
    Page("/workflows/{ref}", "workflow.html", "Workflow", nav=False, feature="workflows"),
    Page("/sagas", "sagas.html", "Sagas", feature="sagas"),
    Page("/sagas/{key}", "saga.html", "Saga", nav=False, feature="sagas"),
    Page("/workers", "workers.html", "Workers"),
    Page("/tokens", "tokens.html", "Tokens", permission=Permission.ADMIN),
]

# Dashboard section -> the feature that brings it.
OPTIONAL = {"dlq": "ops", "batches": "batches", "workflows": "workflows", "sagas": "sagas"}


def available(app: App) -> list[str]:
    """The optional sections this app has: those whose feature is plugged in."""
    plugged = app.features
    return [section for section, feature in OPTIONAL.items() if feature in plugged]


def pages(app: App) -> list[Page]:
    have = set(available(app))
    return [p for p in PAGES if p.feature is None or p.feature in have]
