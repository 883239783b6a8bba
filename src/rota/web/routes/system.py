"""Health, the caller's identity, workers and the leader."""

from __future__ import annotations

from rota import __version__
from rota.auth import Permission
from rota.errors import RotaError
from rota.maintenance.horizon import HORIZON_THRESHOLD, horizon_holders
from rota.routing.store import RoutingStore
from rota.web.api import Api, Call
from rota.web.models import (
    DatabaseOut,
    HealthOut,
    HorizonHolderOut,
    LeaderOut,
    MeOut,
    WorkerOut,
    WorkersOut,
)
from rota.web.problems import problem_response
from rota.web.store import WebStore

# A worker counts as seen when it started a job within this many seconds.
WORKER_WINDOW = 600.0


def register(api: Api) -> None:
    api.tags["system"] = "Health, identity, workers and the leader."

    @api.route(
        "GET",
        "/api/health",
        permission=None,
        summary="Health",
        tag="system",
        response=HealthOut,
        errors=(503,),
    )
    def health(call: Call) -> object:
        """Answers without a token: 200 when the database answers and its schema is
        current, else 503 with the reason."""
        try:
            call.app.check_schema()
            version: int | None = call.app.schema_version()
        except RotaError as exc:
            return problem_response(503, str(exc), kind="unavailable")
        return HealthOut(
            status="ok",
            version=__version__,
            dialect=call.app.driver.dialect,
            schema_version=version,
        )

    @api.route(
        "GET",
        "/api/me",
        permission=Permission.READ,
        summary="Who am I",
        tag="system",
        response=MeOut,
    )
    def me(call: Call) -> MeOut:
        """The caller's name, role and permissions (the dashboard shows its buttons by them)."""
        from rota.web.features import available

        p = call.principal
        return MeOut(
            name=p.name,
            role=str(p.role),
            permissions=sorted(str(x) for x in p.permissions),
            features=available(call.app),
        )

    @api.route(
        "GET",
        "/api/workers",
        permission=Permission.READ,
        summary="Workers and leader",
        tag="system",
        response=WorkersOut,
    )
    def workers(call: Call) -> WorkersOut:
        """Every live worker (from its heartbeat row) and those that started a job in the
        last ten minutes, and who holds each leadership."""
        store = WebStore(call.app.driver)
        leaders = store.leader_list()
        led: dict[str, list[str]] = {}
        for lead in leaders:
            if lead.live:
                led.setdefault(lead.leader, []).append(lead.name)
        # Every live worker from its heartbeat row, with what the jobs say about it (how
        # many it runs, when it last started one); a worker seen only in the jobs (an
        # older version, or one whose row expired) is listed too.
        seen = {w.worker: w for w in store.worker_list(WORKER_WINDOW)}
        live = {a.worker_id: a for a in RoutingStore(call.app.driver).worker_list()}
        rows = []
        for name in sorted(set(seen) | set(live)):
            job_view, beat = seen.get(name), live.get(name)
            rows.append(
                WorkerOut(
                    worker=name,
                    running=job_view.running if job_view else 0,
                    queues=sorted(
                        set(job_view.queues if job_view else ()) | set(beat.queues if beat else ())
                    ),
                    last_seen=job_view.last_seen if job_view else None,
                    leader_of=led.get(name, []),
                    last_heartbeat=beat.seen_at if beat else None,
                    started_at=beat.started_at if beat else None,
                    capabilities=list(beat.capabilities) if beat else [],
                )
            )
        return WorkersOut(
            workers=rows,
            leaders=[
                LeaderOut(
                    name=x.name,
                    leader=x.leader,
                    elected_at=x.elected_at,
                    expires_at=x.expires_at,
                    live=x.live,
                )
                for x in leaders
            ],
        )

    @api.route(
        "GET",
        "/api/database",
        permission=Permission.READ,
        summary="What holds the database back",
        tag="system",
        response=DatabaseOut,
    )
    def database(call: Call) -> DatabaseOut:
        """Transactions that hold PostgreSQL's xmin horizon (while they last, VACUUM keeps
        the dead rows of every job that changed state): the overview warns when one is
        older than the threshold (docs/operations.md#long-transactions)."""
        holders = horizon_holders(call.app.driver)
        return DatabaseOut(
            dialect=call.app.driver.dialect,
            horizon_threshold_s=HORIZON_THRESHOLD,
            horizon_held=None
            if holders is None
            else any(h.age_s >= HORIZON_THRESHOLD for h in holders),
            holders=None
            if holders is None
            else [
                HorizonHolderOut(
                    kind=h.kind,
                    holder=h.holder,
                    username=h.username,
                    application=h.application,
                    client=h.client,
                    state=h.state,
                    since=h.since,
                    age_s=h.age_s,
                )
                for h in holders
            ],
        )
