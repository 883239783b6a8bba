"""Log set-up for rota processes: readable text or one JSON object per line. A JSON line
logged while a job runs carries its job id, task, queue, attempt and trace id, whichever
logger wrote it (the worker sets the job in a context variable for each attempt)."""

from __future__ import annotations

import json
import logging
import sys
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from rota.job import Job

_CONTEXT_FIELDS = (
    "job_id",
    "task",
    "queue",
    "attempt",
    "worker",
    "trace_id",
    "event",
    "outcome",
    "duration",
    "error",
)

# The job whose attempt runs in this context: set by the worker per attempt, and copied
# into a sync task's thread with the rest of the context.
current_job: ContextVar[Job | None] = ContextVar("rota_current_job", default=None)


def job_fields(job: Job) -> dict[str, Any]:
    """The log fields of `job`'s current attempt."""
    from rota.telemetry.tracing import trace_id_of

    fields: dict[str, Any] = {
        "job_id": job.id,
        "task": job.task,
        "queue": job.queue,
        "attempt": job.attempt,
    }
    trace_id = trace_id_of(job)
    if trace_id is not None:
        fields["trace_id"] = trace_id
    return fields


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        data: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        job = current_job.get()
        context = job_fields(job) if job is not None else {}
        for name in _CONTEXT_FIELDS:
            value = getattr(record, name, None)
            if value is None:
                value = context.get(name)
            if value is not None:
                data[name] = value
        if record.exc_info:
            data["exception"] = self.formatException(record.exc_info)
        return json.dumps(data, default=str)


_TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def configure_default() -> bool:
    """Give rota's loggers a stderr handler at INFO when the application configured no
    logging at all (a worker started from Python would otherwise log nothing, and
    Python's last-resort handler shows only warnings). Returns whether it did."""
    root = logging.getLogger()
    rota_log = logging.getLogger("rota")
    if root.handlers or rota_log.handlers:
        return False
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_TEXT_FORMAT))
    # The application may configure logging later: from then on its handlers get rota's
    # records (they still propagate) and this one stands aside, so nothing shows twice.
    handler.addFilter(lambda record: not root.handlers)
    rota_log.addHandler(handler)
    if rota_log.level == logging.NOTSET:
        rota_log.setLevel(logging.INFO)
    return True


def configure(level: str = "info", fmt: str = "text") -> None:
    """Configure the root logger once for a rota process (CLI and worker)."""
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter(_TEXT_FORMAT))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # psycopg's pool logs every reconnect attempt at INFO; ours already says it once.
    logging.getLogger("psycopg.pool").setLevel(logging.WARNING)
