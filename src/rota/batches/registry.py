"""`app.batches`: create batches (validated before anything is written, optionally in the
caller's transaction), read their status, suspend, resume and cancel them."""

from __future__ import annotations

import builtins
import contextlib
import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from rota.batches.controller import advance
from rota.batches.spec import (
    BatchSpec,
    FailureRule,
    SuccessRule,
    as_tuple,
    check_name,
)
from rota.batches.status import BatchStatus
from rota.batches.store import BatchFilter, BatchInsert, BatchRecord, BatchStore
from rota.drivers.base import JobInsert
from rota.errors import ArgumentsError, BatchError, BatchNotFoundError, RotaError
from rota.job import Job
from rota.labels import check_queue_name
from rota.task import Task, check_priority

if TYPE_CHECKING:
    from rota.app import App
    from rota.batches.service import BatchReport

# A sample status, to check at creation that the finish callback accepts `batch=`.
_SAMPLE_STATUS: dict[str, Any] = {"id": 0, "condition": "Complete"}


class BatchRegistry:
    """Batches of one app: `app.batches.get("nightly-shards")`."""

    def __init__(self, app: App) -> None:
        self._app = app

    def create(
        self,
        task: Task[Any, Any] | str,
        *,
        items: Sequence[Any] | None = None,
        completions: int | None = None,
        indexed: bool = False,
        args: dict[str, Any] | None = None,
        parallelism: int = 1,
        backoff_limit: int | None = None,
        backoff_limit_per_index: int | None = None,
        max_failed_indexes: int | None = None,
        failure_rules: Sequence[FailureRule] = (),
        success_policy: Sequence[SuccessRule] = (),
        active_deadline: float | None = None,
        ttl_after_finished: float | None = None,
        backoff_delay: float = 10.0,
        backoff_cap: float = 360.0,
        suspend: bool = False,
        name: str | None = None,
        on_finish: Task[Any, Any] | str | None = None,
        queue: str | None = None,
        priority: int | None = None,
        conn: Any = None,
    ) -> BatchStatus:
        """Store a batch and start its first jobs (in `conn`'s transaction if given).
        Everything is validated first: the spec, every item's arguments, the callback.
        A `name` already taken returns that batch (`created` False) and changes nothing."""
        target = self._task(task, "task")
        if not isinstance(indexed, bool) or not isinstance(suspend, bool):
            raise BatchError("indexed= and suspend= take True or False")
        if items is not None and completions is not None:
            raise BatchError("pass items= (one job per item) or completions=, not both")
        if items is not None and args is not None:
            raise BatchError("args= is for completions= batches; with items= each item is its args")
        item_list = None if items is None else as_tuple(items, "items")
        count = (
            len(item_list) if item_list is not None else (1 if completions is None else completions)
        )
        spec = BatchSpec(
            completions=count,
            indexed=indexed,
            parallelism=parallelism,
            backoff_limit=backoff_limit,
            backoff_limit_per_index=backoff_limit_per_index,
            max_failed_indexes=max_failed_indexes,
            failure_rules=as_tuple(failure_rules, "failure_rules"),
            success_rules=as_tuple(success_policy, "success_policy"),
            active_deadline=active_deadline,
            ttl_after_finished=ttl_after_finished,
            backoff_delay=backoff_delay,
            backoff_cap=backoff_cap,
        )
        check_name(name)
        if args is not None and not isinstance(args, dict):
            raise ArgumentsError(f"args must be a dict, not {type(args).__name__}")
        # Validate every job's arguments (and options) before anything is written.
        item_args: list[str] | None = None
        if item_list is None:
            template = target.build(dict(args or {}), queue=queue, priority=priority)
        else:
            item_args = []
            for n, item in enumerate(item_list):
                kwargs = dict(item) if isinstance(item, dict) else {"item": item}
                try:
                    built = target.build(kwargs, queue=queue, priority=priority)
                except RotaError as exc:
                    raise type(exc)(f"batch item {n}: {exc}") from None
                item_args.append(built.args_json)
            check_queue_name(queue or target.policy.queue, ArgumentsError)
            if priority is not None:
                check_priority(priority, ArgumentsError)
            template = JobInsert(
                task=target.name,
                queue=queue or target.policy.queue,
                args_json="{}",
                priority=target.policy.priority if priority is None else priority,
                max_attempts=1,
            )
        callback = None
        if on_finish is not None:
            callback = self._task(on_finish, "on_finish")
            try:
                callback.build({"batch": _SAMPLE_STATUS})
            except RotaError as exc:
                raise BatchError(
                    f"on_finish task {callback.name} must take the argument `batch` (a dict "
                    f"with the batch's status): {exc}"
                ) from None
        row = BatchInsert(
            name=name,
            task=target.name,
            queue=template.queue,
            priority=template.priority,
            args_json=template.args_json,
            spec_json=json.dumps(spec.to_json()),
            parallelism=spec.parallelism,
            suspended=suspend,
            completions=count,
            item_args=item_args,
            on_finish=None if callback is None else callback.name,
            on_finish_queue=None if callback is None else callback.policy.queue,
            on_finish_priority=0 if callback is None else callback.policy.priority,
            on_finish_max_attempts=20 if callback is None else callback.policy.max_attempts,
        )
        store = BatchStore(self._app.driver)
        with self._transaction(conn) as tx:
            record = store.create(row, conn=tx)
            if record.created:
                # The first wave starts in the same transaction: jobs exist as soon as the
                # batch does (and roll back with it).
                advance(store, record, store.items(record.id, conn=tx), record.created_at, conn=tx)
                found = store.get(record.id, conn=tx)
                assert found is not None
                record = found
            items_now = store.items(record.id, conn=tx)
        status = BatchStatus.of(record, ((i.index, i.state) for i in items_now))
        return status

    @contextlib.contextmanager
    def _transaction(self, conn: Any) -> Iterator[Any]:
        if conn is not None:
            yield conn
            return
        with self._app.driver.transaction() as own:
            yield own

    def _task(self, task: Task[Any, Any] | str, what: str) -> Task[Any, Any]:
        found = self._app.get_task(task) if isinstance(task, str) else task
        if not isinstance(found, Task) or self._app.tasks.get(found.name) is not found:
            raise BatchError(f"{what}={task!r} is not a task of this app: register it first")
        return found

    # --- read ---------------------------------------------------------------------------

    def _record(self, ref: int | str) -> BatchRecord:
        if isinstance(ref, bool) or not isinstance(ref, int | str):
            raise BatchError(f"a batch is named by its id or name, not {ref!r}")
        key: int | str = int(ref) if isinstance(ref, str) and ref.isdigit() else ref
        record = BatchStore(self._app.driver).get(key)
        if record is None:
            raise BatchNotFoundError(
                f"no batch with {'id' if isinstance(key, int) else 'name'} {ref!r}"
            )
        return record

    def get(self, ref: int | str) -> BatchStatus:
        """A batch's status by id or name, with its completed and failed indexes."""
        record = self._record(ref)
        items = BatchStore(self._app.driver).items(record.id)
        return BatchStatus.of(record, ((i.index, i.state) for i in items))

    def list(
        self, *, open_only: bool = False, task: str | None = None, limit: int = 50
    ) -> list[BatchStatus]:
        """Batches, newest first (indexes are not listed: use get())."""
        if not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ArgumentsError("limit must be from 1 to 10000")
        where = BatchFilter(open_only=open_only, limit=limit, task=task)
        return [BatchStatus.of(r) for r in BatchStore(self._app.driver).all(where)]

    def jobs(self, ref: int | str) -> builtins.list[Job]:
        """Every job (attempt) the batch started, oldest first."""
        record = self._record(ref)
        found = (
            self._app.driver.job_get(i) for i in BatchStore(self._app.driver).job_ids(record.id)
        )
        return [job for job in found if job is not None]

    # --- act ------------------------------------------------------------------------------

    def advance(self) -> BatchReport:
        """One pass of the batch controller now, in this process (what the leader's
        controller does every `batch_interval`): handy in tests and scripts."""
        from rota.batches.service import BatchController

        return BatchController(self._app.driver, 1.0).run_once()

    def suspend(self, ref: int | str) -> BatchStatus:
        """Stop starting jobs and cancel the running ones (they count as neither failed
        nor succeeded); progress so far is kept."""
        return self._set_suspended(ref, True)

    def resume(self, ref: int | str) -> BatchStatus:
        """Start jobs again; the active deadline counts from now."""
        return self._set_suspended(ref, False)

    def _set_suspended(self, ref: int | str, suspended: bool) -> BatchStatus:
        record = self._record(ref)
        if not BatchStore(self._app.driver).set_suspended(record.id, suspended):
            raise BatchError(f"batch {ref!r} is {BatchStatus.of(record).state}: it cannot change")
        return self.get(record.id)

    def scale(self, ref: int | str, parallelism: int) -> BatchStatus:
        """Change how many jobs run at once; lowering it cancels the newest running jobs
        (they count neither way and run again later), 0 pauses the batch."""
        BatchSpec(completions=0, parallelism=parallelism)  # validates it
        record = self._record(ref)
        if not BatchStore(self._app.driver).set_parallelism(record.id, parallelism):
            raise BatchError(f"batch {ref!r} is {BatchStatus.of(record).state}: it cannot change")
        return self.get(record.id)

    def cancel(self, ref: int | str) -> BatchStatus:
        """Fail the batch with reason Cancelled: no new jobs, running ones are cancelled,
        and the condition becomes Failed once they have stopped."""
        record = self._record(ref)
        if not BatchStore(self._app.driver).request_cancel(record.id, "cancelled by request"):
            raise BatchError(f"batch {ref!r} is {BatchStatus.of(record).state}: nothing to cancel")
        return self.get(record.id)
