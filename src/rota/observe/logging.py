"""Deprecated location: structured logs now live in rota.telemetry.logging."""

from rota.telemetry.logging import JsonFormatter, configure, current_job, job_fields

__all__ = ["JsonFormatter", "configure", "current_job", "job_fields"]
