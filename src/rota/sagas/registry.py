"""`app.sagas`: register saga definitions, start sagas by business key, and answer
"where is order 42?"; retry a stuck step, abort with compensation."""

from __future__ import annotations

import builtins
import contextlib
import json
from typing import TYPE_CHECKING, Any

from rota.drivers.base import JobInsert
from rota.errors import (
    ArgumentsError,
    InvalidTransitionError,
    JobNotFoundError,
    PayloadError,
    SagaError,
    SagaNotFoundError,
    TaskDefinitionError,
)
from rota.job import Job, JobState
from rota.payload import check_text, encode
from rota.sagas import engine, machine
from rota.sagas.definition import Saga
from rota.sagas.runner import register_step
from rota.sagas.service import SagaReport, SagaSupervisor
from rota.sagas.store import SagaRecord, SagaStatus, SagaStore

if TYPE_CHECKING:
    from rota.app import App

MAX_KEY_LENGTH = 512


def _check_key(key: object) -> str:
    if not isinstance(key, str) or not key.strip() or len(key) > MAX_KEY_LENGTH:
        raise ArgumentsError(
            f"a saga key is a non-empty string of at most {MAX_KEY_LENGTH} chars "
            f"(the business key, like 'order-42'), not {key!r}"
        )
    return check_text(key, "the saga key")


class SagaRegistry:
    """`app.sagas`."""

    def __init__(self, app: App) -> None:
        self._app = app
        self.definitions: dict[str, Saga] = {}

    def register(self, saga: Saga) -> Saga:
        """Register `saga`'s steps and compensations as tasks of this app (the workers
        that run them must register it too: do it where the app is defined)."""
        if not isinstance(saga, Saga):
            raise TaskDefinitionError(f"app.sagas.register takes a rota.Saga, not {saga!r}")
        known = self.definitions.get(saga.name)
        if known is saga:
            return saga
        if known is not None:
            raise TaskDefinitionError(f"a saga named {saga.name!r} is already registered")
        saga.plan()  # refuses a saga without steps
        for step in saga.steps:
            register_step(self._app, step, compensation=False)
            if step.compensate_func is not None:
                register_step(self._app, step, compensation=True)
        saga._apps.append(self._app)
        self.definitions[saga.name] = saga
        return saga

    def _definition(self, saga: Saga | str) -> Saga:
        name = saga.name if isinstance(saga, Saga) else saga
        found = self.definitions.get(name) if isinstance(name, str) else None
        if found is None or (isinstance(saga, Saga) and found is not saga):
            known = ", ".join(sorted(self.definitions)) or "none registered"
            raise TaskDefinitionError(
                f"saga {name!r} is not registered on this app: call app.sagas.register(saga) "
                f"first (registered: {known})"
            )
        return found

    def start(
        self,
        saga: Saga | str,
        *,
        key: str,
        data: dict[str, Any] | None = None,
        conn: Any = None,
    ) -> SagaRecord:
        """Start `saga` for the business `key` with the initial `data`, and queue its
        first step, in one transaction (`conn=`: yours). Starting a key that exists
        returns that saga unchanged (a start is idempotent by key)."""
        definition = self._definition(saga)
        _check_key(key)
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ArgumentsError(
                f"saga data must be a dict (a JSON object), not {type(data).__name__}"
            )
        try:
            data = json.loads(
                encode(data, what=f"the data of saga {key!r}", limit=self._app.max_payload_bytes)
            )
        except PayloadError as exc:
            raise ArgumentsError(str(exc)) from None
        plan = definition.plan()
        first = machine.forward_job(plan, 0)
        if conn is None:
            with self._app.transaction() as own:
                return self._start(definition, key, data, plan, first, own)
        return self._start(definition, key, data, plan, first, conn)

    def _start(
        self,
        definition: Saga,
        key: str,
        data: dict[str, Any],
        plan: list[dict[str, Any]],
        first: machine.NextJob,
        conn: Any,
    ) -> SagaRecord:
        driver = self._app.driver
        started = engine.start(
            driver,
            conn,
            name=definition.name,
            key=key,
            plan=plan,
            data=data,
            first=first,
            insert=self._insert,
        )
        if started is not None:
            return started
        existing = SagaStore(driver).lock_key(conn, key)
        if existing is None:  # deleted between the two statements: let the caller retry
            raise SagaError(f"saga key {key!r} changed hands during the start; retry it")
        if existing.name != definition.name:
            raise SagaError(
                f"key {key!r} belongs to a {existing.name!r} saga, not {definition.name!r}"
            )
        return existing

    def _insert(self, rows: builtins.list[JobInsert], conn: Any) -> builtins.list[Job]:
        if self._app._inline_runner is not None:
            # rota.testing.inline cannot run a saga's steps at enqueue time (each step
            # queues the next inside its own transaction): tests use drain instead.
            return self._app.driver.job_insert_many(rows, conn=conn)
        return self._app._insert(rows, conn=conn, tasks=[])

    # --- look ----------------------------------------------------------------------------

    def get(self, key: str) -> SagaRecord:
        """The saga with business key `key`: its status, step, data and history."""
        saga = SagaStore(self._app.driver).get(_check_key(key))
        if saga is None:
            raise SagaNotFoundError(f"no saga with key {key!r}")
        return saga

    def list(
        self,
        *,
        status: SagaStatus | str | None = None,
        name: str | None = None,
        limit: int = 50,
        before_id: int | None = None,
    ) -> builtins.list[SagaRecord]:
        """Sagas, newest first, optionally by status and saga name."""
        if status is not None:
            try:
                status = SagaStatus(status)
            except ValueError:
                known = ", ".join(s.value for s in SagaStatus)
                raise ArgumentsError(f"unknown saga status {status!r}; known: {known}") from None
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ArgumentsError("limit must be from 1 to 10000")
        return SagaStore(self._app.driver).search(
            None if status is None else str(status), name, limit, before_id
        )

    # --- act -----------------------------------------------------------------------------

    def supervise(self) -> SagaReport:
        """One pass of what the leader worker does every stage interval: move on the
        sagas whose step or compensation failed for good (or passed its deadline).
        Tests that run jobs with `rota.testing.drain` call it between drains."""
        return SagaSupervisor(self._app.driver, 1.0).run_once()

    def retry(self, key: str) -> SagaRecord:
        """Run the current step again now: a step waiting for its backoff runs at once;
        a step or compensation whose job ended (a failed saga's compensation, a
        dead-lettered or cancelled step) gets a new job. A running step is refused."""
        driver = self._app.driver
        saga = self.get(key)
        if saga.status in (SagaStatus.COMPLETED, SagaStatus.COMPENSATED):
            raise SagaError(f"saga {key!r} is {saga.status}: there is nothing to retry")
        job = None if saga.job_id is None else driver.job_get(saga.job_id)
        if saga.status is not SagaStatus.FAILED and job is not None:
            if job.state is JobState.RUNNING:
                raise SagaError(
                    f"step {saga.step!r} of saga {key!r} is running now (job {job.id}); "
                    "wait for it, or abort the saga"
                )
            if job.state in (JobState.SCHEDULED, JobState.RETRYABLE):
                driver.job_retry(job.id)
                return self.get(key)
            if job.state is JobState.AVAILABLE:
                return saga  # already waiting for a worker
        with self._app.transaction() as conn:
            moved = engine.apply(driver, conn, saga.id, saga.version, machine.retried)
        if moved is None:
            raise SagaError(f"saga {key!r} moved on meanwhile; look at it again")
        return moved

    def abort(
        self, key: str, *, reason: str = "aborted by request", force: bool = False
    ) -> SagaRecord:
        """Stop a running saga and compensate the steps it completed, newest first; the
        current step's job is cancelled before it runs.

        A step that is running now is refused: let it finish (it is then compensated
        like the others), or pass `force=True` to abort at once, and the running step
        is asked to stop (`ctx.cancelled`) and its result ignored, but whatever it did
        before stopping is not compensated."""
        _check_key(key)
        if not isinstance(reason, str) or not reason:
            raise ArgumentsError("reason must be a non-empty string")
        driver = self._app.driver
        with self._app.transaction() as conn:
            saga = SagaStore(driver).lock_key(conn, key)
            if saga is None:
                raise SagaNotFoundError(f"no saga with key {key!r}")
            if saga.status is not SagaStatus.RUNNING:
                raise SagaError(
                    f"saga {key!r} is {saga.status}: only a running saga can be aborted"
                )
            # Read under a row lock in this transaction: a worker claiming the job between
            # this check and the commit would run the step after the abort, uncompensated.
            state = None if saga.job_id is None else SagaStore(driver).job_state(conn, saga.job_id)
            if state is JobState.RUNNING and not force:
                raise SagaError(
                    f"step {saga.step!r} of saga {key!r} is running now (job {saga.job_id}): "
                    "abort again once it finished, so that it is compensated too, or "
                    "force the abort (its effects so far are then not undone)"
                )
            moved = engine.apply(
                driver,
                conn,
                saga.id,
                saga.version,
                lambda s: machine.step_failed(s, reason, aborted=True),
            )
        assert moved is not None  # the row was locked at this version
        if saga.job_id is not None:
            # Its job is stale now (the version moved on); stop it doing the work.
            with contextlib.suppress(InvalidTransitionError, JobNotFoundError):
                driver.job_cancel(saga.job_id)
        return moved
