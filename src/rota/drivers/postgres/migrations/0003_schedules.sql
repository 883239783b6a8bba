-- Cron schedules (Kubernetes CronJob semantics) and their runs. A run's tick key
-- (schedule_id, scheduled_minute) is unique: two schedulers racing for the same tick
-- cannot both create its run.
CREATE TABLE IF NOT EXISTS rota_schedules (
    id                       bigserial PRIMARY KEY,
    name                     text        NOT NULL UNIQUE,
    task                     text        NOT NULL,
    queue                    text        NOT NULL,
    priority                 smallint    NOT NULL DEFAULT 0,
    max_attempts             integer     NOT NULL,
    args                     jsonb       NOT NULL DEFAULT '{}'::jsonb,
    expression               text        NOT NULL,
    timezone                 text        NOT NULL DEFAULT 'UTC',
    dst                      text        NOT NULL DEFAULT 'once',
    concurrency              text        NOT NULL DEFAULT 'allow',
    starting_deadline        float8,
    successful_history_limit integer     NOT NULL DEFAULT 3,
    failed_history_limit     integer     NOT NULL DEFAULT 1,
    strict_missed_limit      boolean     NOT NULL DEFAULT false,
    suspended                boolean     NOT NULL DEFAULT false,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    last_schedule_time       timestamptz,
    last_successful_time     timestamptz,
    last_missed_time         timestamptz,
    last_event               text,
    last_event_at            timestamptz,
    CONSTRAINT rota_schedules_dst_check CHECK (dst IN ('once', 'kubernetes')),
    CONSTRAINT rota_schedules_concurrency_check
        CHECK (concurrency IN ('allow', 'forbid', 'replace')),
    CONSTRAINT rota_schedules_limits_check
        CHECK (successful_history_limit >= 0 AND failed_history_limit >= 0),
    CONSTRAINT rota_schedules_deadline_check
        CHECK (starting_deadline IS NULL OR starting_deadline > 0)
);

CREATE TABLE IF NOT EXISTS rota_schedule_runs (
    id               bigserial   PRIMARY KEY,
    schedule_id      bigint      NOT NULL REFERENCES rota_schedules (id) ON DELETE CASCADE,
    name             text        NOT NULL,
    kind             text        NOT NULL,
    scheduled_minute bigint,
    scheduled_at     timestamptz NOT NULL,
    scheduled_local  text        NOT NULL,
    -- Deleting the job (history limits, the pruner) deletes its run.
    job_id           bigint      REFERENCES rota_jobs (id) ON DELETE CASCADE,
    scheduler        text,
    created_at       timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rota_schedule_runs_kind_check CHECK (kind IN ('scheduled', 'manual')),
    CONSTRAINT rota_schedule_runs_minute_check
        CHECK ((kind = 'scheduled') = (scheduled_minute IS NOT NULL)),
    -- The tick key: at most one run per schedule and scheduled UTC minute.
    CONSTRAINT rota_schedule_runs_tick_key UNIQUE (schedule_id, scheduled_minute),
    CONSTRAINT rota_schedule_runs_name_key UNIQUE (schedule_id, name)
);

-- The pruner deletes jobs by the thousand: each delete finds its run through this index.
CREATE INDEX IF NOT EXISTS rota_schedule_runs_job_idx ON rota_schedule_runs (job_id);
