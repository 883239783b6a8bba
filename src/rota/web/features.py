"""Optional sections: a feature shows in the dashboard and API when the app has its
namespace (`app.dlq`, `app.batches`, `app.workflows`, `app.sagas`). Adding one is a
router module in rota.web.routes plus a Page here and a template."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rota.auth import Permission

if TYPE_CHECKING:
    from rota.app import App


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
    Page("/dead-letters", "dead_letters.html", "Dead letters", permission=Permission.DLQ_READ),
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

OPTIONAL = ("dlq", "batches", "workflows", "sagas")


def available(app: App) -> list[str]:
    """The optional namespaces this app has (they are cached properties on App)."""
    return [name for name in OPTIONAL if getattr(type(app), name, None) is not None]


def pages(app: App) -> list[Page]:
    have = set(available(app))
    return [p for p in PAGES if p.feature is None or p.feature in have]
