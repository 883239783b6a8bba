"""`app.dlq`: dead letters (discarded jobs) listed and filtered with their attempt
history, and governed replay: bounded, paced, deduplicated, permission-checked, audited."""

from __future__ import annotations

import builtins
import math
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from rota.auth import Permission, Principal
from rota.errors import ArgumentsError, JobNotFoundError
from rota.job import Job
from rota.ops.model import ReplayRecord, ReplayReport, ReplayRequest, Selection
from rota.ops.principal import resolve
from rota.ops.store import OpsStore

if TYPE_CHECKING:
    from rota.app import App

MAX_REPLAY = 100_000
MAX_RATE = 100_000.0
MAX_REASON = 1_000


class DeadLetters:
    """`app.dlq`: list, show, replay and dismiss dead letters."""

    def __init__(self, app: App) -> None:
        self._app = app

    def list(
        self,
        selection: Selection | Mapping[str, Any] | None = None,
        *,
        limit: int = 50,
        before_id: int | None = None,
        principal: Principal | None = None,
        token: str | None = None,
        **filters: Any,
    ) -> builtins.list[Job]:
        """Dead letters matching every filter given (task, queue, error_type, text, since,
        until, ids, partition_key), newest first, each with its attempt history."""
        chosen = Selection.of(selection, **filters)
        _check_range("limit", limit, 1, 10_000)
        resolve(self._app, principal, token, Permission.DLQ_READ)
        return OpsStore(self._app.driver).dead_letter_list(chosen, limit, before_id)

    def get(
        self, job_id: int, *, principal: Principal | None = None, token: str | None = None
    ) -> Job:
        """One job with its whole attempt history (any state: a replayed one shows its
        new attempts after the failed ones)."""
        resolve(self._app, principal, token, Permission.DLQ_READ)
        job = self._app.driver.job_get(job_id)
        if job is None:
            raise JobNotFoundError(f"no job with id {job_id}")
        return job

    def replay(
        self,
        selection: Selection | Mapping[str, Any] | None = None,
        *,
        reason: str,
        rate: float | None = None,
        dry_run: bool = False,
        limit: int = 10_000,
        attempts: int = 1,
        principal: Principal | None = None,
        token: str | None = None,
        **filters: Any,
    ) -> ReplayReport:
        """Put the dead letters of a bounded selection back in their queues.

        - `reason` is required and kept in the audit record (table rota_replays) with
          who (the principal), when, the selection, the count and the job ids.
        - `rate` (jobs per second) paces the replay: job k becomes due k / rate seconds
          from now, so a slow downstream service is not flooded. None: all at once.
        - Each dead letter is replayed in place (same id, history kept) with `attempts`
          more attempts. A replayed job is no longer a dead letter, so replaying the same
          selection again finds only jobs that failed again: no duplicates, ever.
        - The oldest `limit` matching dead letters are taken; `matched` says how many match.
        - `dry_run=True` counts (per task) what would be replayed, and changes nothing.
        - Needs the `replay` permission: `token=` (an API token) or `principal=`; with
          neither, the caller has direct database access and acts as admin.
        """
        chosen = Selection.of(selection, **filters)
        if not chosen.bounded and not chosen.all:
            raise ArgumentsError(
                "refusing to replay every dead letter: narrow the selection (ids, task, queue, "
                "error_type, text, since/until, partition_key) or pass all=True"
            )
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise ArgumentsError(
                f"a replay needs a reason (a non-empty string of at most {MAX_REASON} chars)"
            )
        if rate is not None and (
            isinstance(rate, bool)
            or not isinstance(rate, int | float)
            or not math.isfinite(rate)
            or not 0 < rate <= MAX_RATE
        ):
            raise ArgumentsError(f"rate must be jobs per second, above 0 and at most {MAX_RATE:g}")
        _check_range("limit", limit, 1, MAX_REPLAY)
        _check_range("attempts", attempts, 1, 10_000)
        actor = resolve(
            self._app, principal, token, Permission.DLQ_READ if dry_run else Permission.REPLAY
        )
        ops = OpsStore(self._app.driver)
        per_task, matched = ops.dead_letter_count(chosen, limit)
        if dry_run:
            return ReplayReport(
                dry_run=True,
                count=sum(per_task.values()),
                per_task=per_task,
                matched=matched,
                principal=actor.describe(),
                rate=None if rate is None else float(rate),
            )
        replay_id, moved = ops.dead_letter_replay(
            ReplayRequest(
                selection=chosen,
                limit=limit,
                rate=None if rate is None else float(rate),
                attempts=attempts,
                principal=actor.describe(),
                reason=reason.strip(),
            )
        )
        done: dict[str, int] = {}
        for _, task in moved:
            done[task] = done.get(task, 0) + 1
        return ReplayReport(
            dry_run=False,
            count=len(moved),
            per_task=dict(sorted(done.items())),
            matched=matched,
            principal=actor.describe(),
            replay_id=replay_id,
            job_ids=tuple(job_id for job_id, _ in moved),
            rate=None if rate is None else float(rate),
        )

    def dismiss(
        self,
        ids: Iterable[int],
        *,
        reason: str,
        principal: Principal | None = None,
        token: str | None = None,
    ) -> builtins.list[int]:
        """Give up on dead letters without running them: they become cancelled (who and
        why kept in their meta) and stop holding up their partition key. Returns the ids
        that were dead letters."""
        chosen = Selection.of(ids=tuple(ids))
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON:
            raise ArgumentsError("dismissing dead letters needs a reason")
        actor = resolve(self._app, principal, token, Permission.OPERATE)
        assert chosen.ids is not None
        return OpsStore(self._app.driver).dead_letter_dismiss(
            chosen.ids, actor.describe(), reason.strip()
        )

    def replays(
        self,
        *,
        limit: int = 50,
        before_id: int | None = None,
        principal: Principal | None = None,
        token: str | None = None,
    ) -> builtins.list[ReplayRecord]:
        """The replay audit records, newest first."""
        _check_range("limit", limit, 1, 10_000)
        resolve(self._app, principal, token, Permission.DLQ_READ)
        return OpsStore(self._app.driver).replay_list(limit, before_id)


def _check_range(name: str, value: object, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise ArgumentsError(f"{name} must be an integer from {low} to {high}, not {value!r}")
