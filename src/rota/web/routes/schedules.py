"""Schedules: list with next and last runs, one schedule with its history, trigger,
suspend and resume."""

from __future__ import annotations

from rota.auth import Permission
from rota.schedules.view import run_json, schedule_json
from rota.web import visibility
from rota.web.api import Api, Call
from rota.web.models import (
    HistoryQuery,
    NamePath,
    ScheduleDetailOut,
    ScheduleOut,
    ScheduleRunOut,
    TriggerBody,
)


def register(api: Api) -> None:
    api.tags["schedules"] = "Cron schedules: next and last runs, trigger, suspend, resume."

    @api.route(
        "GET",
        "/api/schedules",
        permission=Permission.READ,
        summary="List schedules",
        tag="schedules",
        response=ScheduleOut,
        many=True,
    )
    def list_schedules(call: Call) -> list[ScheduleOut]:
        """Every stored schedule with its next run (in its own zone and UTC) and last runs."""
        now = call.app.driver.db_now()
        return [
            ScheduleOut.model_validate(visibility.schedule(schedule_json(r, now), call.principal))
            for r in call.app.list_schedules()
        ]

    @api.route(
        "GET",
        "/api/schedules/{name}",
        permission=Permission.READ,
        summary="Show a schedule",
        tag="schedules",
        path_model=NamePath,
        query=HistoryQuery,
        response=ScheduleDetailOut,
        errors=(404,),
    )
    def get_schedule(call: Call) -> ScheduleDetailOut:
        """One schedule, its next five runs and its recent runs with their jobs' states."""
        record = call.app.get_schedule(call.path.name)
        now = call.app.driver.db_now()
        runs = call.app.schedule_history(record.name, limit=call.query.limit)
        shown = visibility.schedule(schedule_json(record, now, 5), call.principal)
        return ScheduleDetailOut.model_validate({**shown, "history": [run_json(r) for r in runs]})

    @api.route(
        "POST",
        "/api/schedules/{name}/trigger",
        permission=Permission.OPERATE,
        summary="Trigger a schedule",
        tag="schedules",
        path_model=NamePath,
        body=TriggerBody,
        response=ScheduleRunOut,
        status=201,
        errors=(404,),
    )
    def trigger_schedule(call: Call) -> ScheduleRunOut:
        """Run the schedule now, outside its timetable (like `kubectl create job --from`)."""
        run = call.app.trigger_schedule(call.path.name, name=call.body.name)
        return ScheduleRunOut.model_validate(run_json(run))

    @api.route(
        "POST",
        "/api/schedules/{name}/suspend",
        permission=Permission.OPERATE,
        summary="Suspend a schedule",
        tag="schedules",
        path_model=NamePath,
        response=ScheduleOut,
        errors=(404,),
    )
    def suspend_schedule(call: Call) -> ScheduleOut:
        """No new runs; running ones continue."""
        record = call.app.suspend_schedule(call.path.name)
        shown = schedule_json(record, call.app.driver.db_now())
        return ScheduleOut.model_validate(visibility.schedule(shown, call.principal))

    @api.route(
        "POST",
        "/api/schedules/{name}/resume",
        permission=Permission.OPERATE,
        summary="Resume a schedule",
        tag="schedules",
        path_model=NamePath,
        response=ScheduleOut,
        errors=(404,),
    )
    def resume_schedule(call: Call) -> ScheduleOut:
        """Runs again; the latest tick missed meanwhile starts if inside its deadline."""
        record = call.app.resume_schedule(call.path.name)
        shown = schedule_json(record, call.app.driver.db_now())
        return ScheduleOut.model_validate(visibility.schedule(shown, call.principal))
