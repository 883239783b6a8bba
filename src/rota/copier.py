"""Move an installation from SQLite to PostgreSQL (`rota db copy`). Table-driven: every
rota table present in both databases is copied (jobs with their history and steps,
schedules and runs, tokens, and the tables later features add), parents before children,
each value converted by the target column's type, all in one target transaction, and the
row counts checked before it commits."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from rota.drivers.base import CopyColumn, Driver, JobFilter
from rota.errors import ConfigurationError, SchemaError
from rota.job import JobState

# Tables that are not data: the target keeps its own migrations ledger, and leadership
# is re-elected on the target within seconds of its first worker starting.
SKIPPED = {
    "rota_migrations": "the target records its own migrations",
    "rota_leaders": "leadership is re-elected on the target",
    "rota_presence": "live workers register on the target when they start",
    # The kept counts (0019): the target derives them from the copied jobs at the end
    # (CopyWriter.recount), the last day's throughput and workers from the jobs' times.
    "rota_job_counts": "recounted on the target from its jobs",
    "rota_job_deltas": "recounted on the target from its jobs",
    "rota_job_marks": "recounted on the target from its jobs",
    "rota_job_flow": "the last day's throughput, drawn on the target from the jobs' times",
    "rota_workers_seen": "the last day's workers, listed on the target from the jobs",
}

Transform = Callable[[Any], Any]
_TRANSFORMS: dict[tuple[str, str], Transform] = {}


def register_transform(table: str, column: str, func: Transform) -> None:
    """Rewrite one column's values on the way (after the type conversion) — for JSON
    that embeds dialect-specific values, such as epoch seconds where PostgreSQL rows
    hold ISO times. Features that store such JSON register here."""
    _TRANSFORMS[(table, column)] = func


def _iso(value: Any) -> Any:
    if isinstance(value, int | float) and not isinstance(value, bool):
        return datetime.fromtimestamp(value, UTC).isoformat()
    return value


def _times_in_entries(*keys: str) -> Transform:
    """A JSON array of objects whose `keys` hold epoch seconds on SQLite."""

    def convert(value: Any) -> Any:
        if not isinstance(value, str):
            return value
        entries = json.loads(value)
        if not isinstance(entries, list):
            return value
        for entry in entries:
            if isinstance(entry, dict):
                for key in keys:
                    if key in entry:
                        entry[key] = _iso(entry[key])
        return json.dumps(entries)

    return convert


def _dismissed_at(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    meta = json.loads(value)
    dismissed = meta.get("dismissed") if isinstance(meta, dict) else None
    if isinstance(dismissed, dict) and "at" in dismissed:
        dismissed["at"] = _iso(dismissed["at"])
        return json.dumps(meta)
    return value


register_transform("rota_jobs", "history", _times_in_entries("started_at", "finished_at"))
register_transform("rota_jobs", "meta", _dismissed_at)
register_transform("rota_sagas", "history", _times_in_entries("at"))


def _converter(target: CopyColumn) -> Callable[[Any], Any]:
    """SQLite stores times as epoch seconds, booleans as 0/1 and JSON as text."""
    kind = target.type
    if kind == "timestamptz":

        def to_time(value: Any) -> Any:
            if isinstance(value, int | float) and not isinstance(value, bool):
                return datetime.fromtimestamp(value, UTC)
            if isinstance(value, str):
                parsed = datetime.fromisoformat(value)
                return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
            return value

        return to_time
    if kind == "bool":
        return lambda value: None if value is None else bool(value)
    if kind in ("jsonb", "json"):
        return lambda value: value if value is None or isinstance(value, str) else json.dumps(value)
    if kind.startswith("_"):  # an array: SQLite keeps it as JSON text
        return lambda value: json.loads(value) if isinstance(value, str) else value
    return lambda value: value


def _chain(first: Transform, then: Transform | None) -> Transform:
    if then is None:
        return first
    return lambda value: then(first(value))


@dataclass(frozen=True)
class TableCopy:
    name: str
    source: int  # rows in the source (when planned, or as read)
    target: int | None = None  # rows in the target after the copy (None: dry run)
    skipped: str | None = None  # why the table is not copied

    @property
    def ok(self) -> bool:
        return self.skipped is not None or self.target is None or self.target == self.source

    def to_json(self) -> dict[str, Any]:
        return {
            "table": self.name,
            "source": self.source,
            "target": self.target,
            "skipped": self.skipped,
            "ok": self.ok,
        }


@dataclass(frozen=True)
class CopyReport:
    dry_run: bool
    tables: tuple[TableCopy, ...]
    running: int = 0  # jobs running in the source: they will be rescued and run again
    source_changed: tuple[str, ...] = ()  # tables that changed in the source meanwhile
    notes: tuple[str, ...] = field(default=())

    @property
    def ok(self) -> bool:
        return all(t.ok for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        return {
            "dry_run": self.dry_run,
            "ok": self.ok,
            "running_jobs": self.running,
            "source_changed": list(self.source_changed),
            "notes": list(self.notes),
            "tables": [t.to_json() for t in self.tables],
        }


def _order(tables: list[str], dependencies: list[tuple[str, str]]) -> list[str]:
    """Parents before children (foreign keys of the target), otherwise by name."""
    parents = {t: {p for c, p in dependencies if c == t and p != t and p in tables} for t in tables}
    ordered: list[str] = []
    while parents:
        ready = sorted(t for t, ps in parents.items() if not ps - set(ordered))
        if not ready:
            raise SchemaError(f"circular foreign keys between {sorted(parents)}")
        ordered += ready
        for t in ready:
            del parents[t]
    return ordered


def copy_installation(
    source: Driver,
    target: Driver,
    *,
    dry_run: bool = False,
    batch: int = 1000,
    progress: Callable[[str, int, int | None], None] | None = None,
) -> CopyReport:
    """Copy every rota table of `source` (SQLite) into `target` (PostgreSQL, migrated
    here unless `dry_run`). The target must hold no rota data yet; nothing is committed
    unless every table's count in the target equals the rows read from the source.
    `progress(table, rows copied, rows in the source table)` is called after each page."""
    if source.dialect != "sqlite" or target.dialect != "postgres":
        raise ConfigurationError(
            "rota db copy moves an installation from SQLite (--from sqlite:///...) to "
            "PostgreSQL (--to postgresql://...)"
        )
    if not 1 <= batch <= 100_000:
        raise ConfigurationError("batch must be from 1 to 100000 rows")
    version = source.schema_version()
    if version != source.latest_schema_version:
        raise SchemaError(
            f"the source schema is at version {version}, this rota needs "
            f"{source.latest_schema_version}: run `rota migrate` on the source first"
        )
    notes: list[str] = []
    if not dry_run:
        target.schema_migrate()
    elif target.schema_version() != target.latest_schema_version:
        notes.append("the target schema is not current: the copy will migrate it first")
    source_columns = source.copy.columns()
    target_columns = target.copy.columns() if not notes else source_columns
    running = len(source.job_list(JobFilter(states=(JobState.RUNNING,), limit=10_000)))

    planned: list[TableCopy] = []
    copied_tables: list[str] = []
    for name in sorted(source_columns):
        if name in SKIPPED:
            planned.append(TableCopy(name, source.copy.count(name), skipped=SKIPPED[name]))
            continue
        if name not in target_columns:
            raise SchemaError(f"the target has no table {name}: is it the same rota version?")
        missing = {c.name for c in source_columns[name]} - {c.name for c in target_columns[name]}
        if missing:
            raise SchemaError(
                f"the target's {name} lacks column(s) {sorted(missing)}: the copy would lose "
                "data; use the same rota version on both sides"
            )
        copied_tables.append(name)
    if not notes:
        for name in copied_tables:
            present = target.copy.count(name)
            if present:
                raise ConfigurationError(
                    f"the target already has {present} row(s) in {name}: copy into an empty "
                    "schema (rota db copy never merges)"
                )
    order = _order(copied_tables, target.copy.dependencies() if not notes else [])
    if dry_run:
        counts = [TableCopy(n, source.copy.count(n)) for n in order]
        return CopyReport(True, tuple(counts + planned), running=running, notes=tuple(notes))

    results: list[TableCopy] = []
    with target.copy.writer() as writer:
        for name in order:
            columns = [c.name for c in source_columns[name]]
            types = {c.name: c for c in target_columns[name]}
            converters = [
                _chain(_converter(types[column]), _TRANSFORMS.get((name, column)))
                for column in columns
            ]
            after, read = 0, 0
            total = source.copy.count(name) if progress is not None else None
            if progress is not None:
                progress(name, 0, total)
            while True:
                page = source.copy.read(name, columns, after, batch)
                if not page:
                    break
                rows = [
                    [convert(value) for convert, value in zip(converters, row, strict=True)]
                    for _, row in page
                ]
                writer.write(name, columns, rows)
                read += len(rows)
                after = page[-1][0]
                if progress is not None:
                    progress(name, read, max(total or 0, read))
            results.append(TableCopy(name, read, writer.count(name)))
        writer.advance_sequences()
        writer.recount()
        wrong = [t for t in results if not t.ok]
        if wrong:
            # Raising rolls the whole target transaction back: nothing half-copied stays.
            raise SchemaError(
                "the copy did not verify (source rows read / target rows): "
                + ", ".join(f"{t.name} {t.source}/{t.target}" for t in wrong)
            )
    changed = tuple(t.name for t in results if source.copy.count(t.name) != t.source)
    return CopyReport(
        False, tuple(results + planned), running=running, source_changed=changed, notes=()
    )
