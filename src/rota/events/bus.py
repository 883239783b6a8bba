"""`app.events`: publish facts and deliver each as one job per subscriber. Subscriptions
are stored in the database when a worker declaring them starts, so a publisher delivers
to every subscriber without importing its code, and a new subscriber sees only events
published after it was stored (older ones only through `replay`)."""

from __future__ import annotations

import builtins
import inspect
import json
import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rota.context import Context
from rota.drivers.base import JobInsert
from rota.errors import ArgumentsError, PayloadError, TaskDefinitionError
from rota.events.store import EventFilter, EventRecord, EventStore, Subscription
from rota.job import Job
from rota.payload import check_text, encode
from rota.retry import Backoff
from rota.task import Task, takes_context

if TYPE_CHECKING:
    from rota.app import App

_EVENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,199}")
MAX_KEY_LENGTH = 512

Handler = Callable[..., Any]


def check_event_name(name: object, error: type[Exception] = ArgumentsError) -> str:
    if not isinstance(name, str) or not _EVENT_NAME.fullmatch(name):
        raise error(
            f"bad event name {name!r}: use 1-200 letters, digits and _ . : - "
            "(like 'user.signed_up')"
        )
    return name


def event_of(ctx: Context, payload: Any) -> EventRecord:
    """The event a delivery job carries (its id, name and version are in ctx.meta)."""
    meta = ctx.meta.get("event") or {}
    return EventRecord(
        id=int(meta.get("id", 0)),
        name=str(meta.get("name", "")),
        version=int(meta.get("version", 1)),
        payload=payload,
        key=meta.get("key"),
        published_at=datetime.fromisoformat(meta["published_at"])
        if meta.get("published_at")
        else ctx.job.created_at,
    )


def _delivery(event: str, handler: Handler) -> Callable[..., Any]:
    takes_ctx = takes_context(handler)
    params = list(inspect.signature(handler).parameters.values())
    if len(params) != (2 if takes_ctx else 1):
        raise TaskDefinitionError(
            f"subscriber {getattr(handler, '__name__', handler)!r} of {event!r} must take "
            "(event) or (ctx, event)"
        )
    if inspect.iscoroutinefunction(handler):

        async def deliver_async(ctx: Context, payload: Any) -> Any:
            received = event_of(ctx, payload)
            return await (handler(ctx, received) if takes_ctx else handler(received))

        wrapper: Callable[..., Any] = deliver_async
    else:

        def deliver(ctx: Context, payload: Any) -> Any:
            received = event_of(ctx, payload)
            return handler(ctx, received) if takes_ctx else handler(received)

        wrapper = deliver
    wrapper.__name__ = getattr(handler, "__name__", "subscriber")
    wrapper.__qualname__ = getattr(handler, "__qualname__", wrapper.__name__)
    wrapper.__module__ = getattr(handler, "__module__", __name__)
    wrapper.__doc__ = handler.__doc__
    return wrapper


def _delivery_row(
    sub: Subscription, event: EventRecord, payload_json: str, **extra: Any
) -> JobInsert:
    meta = {
        "event": {
            "id": event.id,
            "name": event.name,
            "version": event.version,
            "key": event.key,
            "published_at": event.published_at.isoformat(),
            **extra,
        }
    }
    return JobInsert(
        task=sub.task,
        queue=sub.queue,
        args_json=f'{{"payload": {payload_json}}}',
        priority=sub.priority,
        max_attempts=sub.max_attempts,
        meta_json=json.dumps(meta),
    )


class EventBus:
    """`app.events`."""

    def __init__(self, app: App) -> None:
        self._app = app
        # Declared in this process: event name -> subscriber tasks.
        self.subscribers: dict[str, builtins.list[Task[Any, Any]]] = {}
        self._synced = False

    @property
    def store(self) -> EventStore:
        return EventStore(self._app.driver)

    def database_changed(self) -> None:
        """The app now points at another database: store the subscriptions there too."""
        self._synced = False

    # --- subscribe ---------------------------------------------------------------------

    def on(
        self,
        event: str,
        *,
        name: str | None = None,
        queue: str = "default",
        priority: int = 0,
        max_attempts: int = 20,
        timeout: float | None = None,
        backoff: Backoff | None = None,
        permanent: Sequence[type[BaseException]] = (),
    ) -> Callable[[Handler], Task[Any, Any]]:
        """Subscribe a function to `event`; it becomes a task (with its own queue,
        retries and dead letters) that receives a `rota.Event`:

            @app.on("user.signed_up", max_attempts=5)
            def send_welcome(event: rota.Event) -> None: ...
        """
        check_event_name(event, TaskDefinitionError)

        def register(handler: Handler) -> Task[Any, Any]:
            if not callable(handler):
                raise TaskDefinitionError(f"@app.on decorates a function, not {handler!r}")
            wrapper = _delivery(event, handler)
            task: Task[Any, Any] = self._app.task(
                name=name,
                queue=queue,
                priority=priority,
                max_attempts=max_attempts,
                timeout=timeout,
                backoff=backoff,
                permanent=permanent,
            )(wrapper)
            tasks = self.subscribers.setdefault(event, [])
            if all(t.name != task.name for t in tasks):
                tasks.append(task)
            self._synced = False
            return task

        return register

    def _declared(self) -> builtins.list[Subscription]:
        return [
            Subscription(
                event=event,
                task=task.name,
                queue=task.policy.queue,
                priority=task.policy.priority,
                max_attempts=task.policy.max_attempts,
            )
            for event, tasks in self.subscribers.items()
            for task in tasks
        ]

    def sync(self) -> builtins.list[Subscription]:
        """Store the subscriptions declared in this process (workers do this when they
        start; publish does it once on first use). Known ones keep their start time."""
        declared = self._declared()
        if declared:
            self.store.subscribe_many(declared)
        self._synced = True
        return declared

    def subscriptions(self) -> builtins.list[Subscription]:
        """Every stored subscription, with when it was first stored."""
        return self.store.subscriptions(None, None)

    def unsubscribe(self, event: str, subscriber: Task[Any, Any] | str) -> bool:
        """Forget a stored subscription: its task gets no more deliveries."""
        task = subscriber.name if isinstance(subscriber, Task) else subscriber
        return self.store.unsubscribe(check_event_name(event), task)

    # --- publish -----------------------------------------------------------------------

    def publish(
        self,
        name: str,
        payload: Any = None,
        *,
        version: int = 1,
        key: str | None = None,
        conn: Any = None,
    ) -> EventRecord:
        """Store the event and one job per stored subscriber, in one transaction (`conn=`:
        yours, so the event commits or rolls back with your writes). With `key`, a
        second publish of the same key delivers nothing and returns the first event."""
        check_event_name(name)
        if isinstance(version, bool) or not isinstance(version, int) or not 1 <= version <= 32_767:
            raise ArgumentsError(f"version must be an integer from 1 to 32767, not {version!r}")
        if key is not None and (not isinstance(key, str) or not key or len(key) > MAX_KEY_LENGTH):
            raise ArgumentsError(
                f"key must be a non-empty string of at most {MAX_KEY_LENGTH} chars"
            )
        if key is not None:
            check_text(key, "key")
        try:
            payload_json = encode(
                payload, what=f"the payload of event {name!r}", limit=self._app.max_payload_bytes
            )
        except PayloadError as exc:
            raise ArgumentsError(str(exc)) from None
        if conn is None:
            if not self._synced:
                self.sync()
            with self._app.transaction() as own:
                event, jobs = self._publish(own, name, version, payload_json, key, deferred=True)
            self._run_inline(jobs)
            return event
        if not self._synced and self.subscribers:
            if self._app.driver.dialect == "sqlite":
                # The caller's transaction holds the file's write lock: store them in it
                # (and again next time, since that transaction may still roll back).
                self.store.subscribe_many(self._declared(), conn=conn)
            else:
                # Apart, once: upserts in every caller's transaction would hold the
                # subscription rows' locks until each commits, serialising publishers.
                self.sync()
        return self._publish(conn, name, version, payload_json, key)[0]

    def _publish(
        self,
        conn: Any,
        name: str,
        version: int,
        payload_json: str,
        key: str | None,
        *,
        deferred: bool = False,
    ) -> tuple[EventRecord, builtins.list[Job]]:
        store = self.store
        event = store.insert(conn, name, version, payload_json, key)
        if not event.created:
            return event, []
        subs = store.subscriptions(conn, name)
        rows = [_delivery_row(s, event, payload_json) for s in subs]
        return event, self._insert(rows, conn, deferred=deferred)

    def _insert(
        self, rows: builtins.list[JobInsert], conn: Any, *, deferred: bool
    ) -> builtins.list[Job]:
        if not rows:
            return []
        if deferred and self._app._inline_runner is not None:
            # rota.testing.inline: run the deliveries once our own transaction committed.
            return self._app.driver.job_insert_many(rows, conn=conn)
        return self._app._insert(rows, conn=conn, tasks=[])

    def _run_inline(self, jobs: builtins.list[Job]) -> None:
        if jobs and self._app._inline_runner is not None:
            self._app._inline_runner(jobs, None)

    # --- look and replay ---------------------------------------------------------------

    def get(self, event_id: int) -> EventRecord | None:
        return self.store.get(event_id)

    def list(
        self,
        *,
        name: str | None = None,
        after_id: int | None = None,
        until_id: int | None = None,
        since: datetime | None = None,
        limit: int = 100,
    ) -> builtins.list[EventRecord]:
        """Events, oldest first."""
        if name is not None:
            check_event_name(name)
        if since is not None and (not isinstance(since, datetime) or since.tzinfo is None):
            raise ArgumentsError("since= must be a timezone-aware datetime")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= 10_000:
            raise ArgumentsError(f"limit must be an integer from 1 to 10000, not {limit!r}")
        for label, value in (("after_id", after_id), ("until_id", until_id)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
                raise ArgumentsError(f"{label} must be an event id (an integer), not {value!r}")
        return self.store.search(
            EventFilter(name=name, after_id=after_id, until_id=until_id, since=since, limit=limit)
        )

    def replay(
        self,
        event: int | EventRecord | None = None,
        *,
        name: str | None = None,
        after_id: int | None = None,
        until_id: int | None = None,
        since: datetime | None = None,
        subscriber: Task[Any, Any] | str | None = None,
        limit: int = 1000,
        conn: Any = None,
    ) -> builtins.list[Job]:
        """Deliver stored events again, on purpose: one event (by id), or those matching
        `name` / an id range / `since`, to `subscriber` (a task subscribed to them) or
        to every current subscriber. Returns the delivery jobs."""
        if event is not None:
            event_id = event.id if isinstance(event, EventRecord) else event
            found = self.get(event_id)
            if found is None:
                raise ArgumentsError(f"no event with id {event_id!r}")
            events = [found]
        else:
            if name is None and after_id is None and until_id is None and since is None:
                raise ArgumentsError(
                    "replay needs an event id or a filter (name=, after_id=, until_id=, since=)"
                )
            events = self.list(
                name=name, after_id=after_id, until_id=until_id, since=since, limit=limit
            )
        wanted = None
        if subscriber is not None:
            wanted = subscriber.name if isinstance(subscriber, Task) else subscriber
        stored = self.store.subscriptions(None, None)
        if not self._synced and wanted is not None and all(s.task != wanted for s in stored):
            # A subscriber declared here but not stored yet (no worker started since).
            self.sync()
            stored = self.store.subscriptions(None, None)
        rows: builtins.list[JobInsert] = []
        for item in events:
            subs = [s for s in stored if s.event == item.name and wanted in (None, s.task)]
            if wanted is not None and not subs:
                raise ArgumentsError(
                    f"{wanted!r} is not subscribed to {item.name!r} (event {item.id}): "
                    "subscribe it with @app.on and start a worker, or app.events.sync()"
                )
            payload_json = json.dumps(item.payload)
            rows.extend(_delivery_row(s, item, payload_json, replay=True) for s in subs)
        if conn is not None:
            return self._insert(rows, conn, deferred=False)
        with self._app.transaction() as own:
            jobs = self._insert(rows, own, deferred=True)
        self._run_inline(jobs)
        return jobs
