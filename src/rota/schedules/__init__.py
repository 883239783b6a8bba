"""Schedules: cron expressions with Kubernetes CronJob semantics. Definitions and pure tick
and decision logic live here (no SQL); the cron maintenance service acts on them."""

from rota.schedules.reconcile import ActiveRun, Decision, Event, EventKind, ScheduleState, reconcile
from rota.schedules.schedule import Schedule
from rota.schedules.spec import (
    MACROS,
    ConcurrencyPolicy,
    ScheduleSpec,
    ScheduleWarning,
    normalize_expression,
)
from rota.schedules.ticks import DstPolicy, Ticks

__all__ = [
    "MACROS",
    "ActiveRun",
    "ConcurrencyPolicy",
    "Decision",
    "DstPolicy",
    "Event",
    "EventKind",
    "Schedule",
    "ScheduleSpec",
    "ScheduleState",
    "ScheduleWarning",
    "Ticks",
    "normalize_expression",
    "reconcile",
]
