-- Cron schedules (Kubernetes CronJob semantics) and their runs. Times are Unix seconds
-- (REAL, UTC). A run's tick key (schedule_id, scheduled_minute) is unique: two schedulers
-- racing for the same tick cannot both create its run.
CREATE TABLE IF NOT EXISTS rota_schedules (
    id                       INTEGER PRIMARY KEY AUTOINCREMENT,
    name                     TEXT    NOT NULL UNIQUE,
    task                     TEXT    NOT NULL,
    queue                    TEXT    NOT NULL,
    priority                 INTEGER NOT NULL DEFAULT 0,
    max_attempts             INTEGER NOT NULL,
    args                     TEXT    NOT NULL DEFAULT '{}',
    expression               TEXT    NOT NULL,
    timezone                 TEXT    NOT NULL DEFAULT 'UTC',
    dst                      TEXT    NOT NULL DEFAULT 'once',
    concurrency              TEXT    NOT NULL DEFAULT 'allow',
    starting_deadline        REAL,
    successful_history_limit INTEGER NOT NULL DEFAULT 3,
    failed_history_limit     INTEGER NOT NULL DEFAULT 1,
    strict_missed_limit      INTEGER NOT NULL DEFAULT 0,
    suspended                INTEGER NOT NULL DEFAULT 0,
    created_at               REAL    NOT NULL,
    updated_at               REAL    NOT NULL,
    last_schedule_time       REAL,
    last_successful_time     REAL,
    last_missed_time         REAL,
    last_event               TEXT,
    last_event_at            REAL,
    CHECK (dst IN ('once', 'kubernetes')),
    CHECK (concurrency IN ('allow', 'forbid', 'replace')),
    CHECK (successful_history_limit >= 0 AND failed_history_limit >= 0),
    CHECK (starting_deadline IS NULL OR starting_deadline > 0)
);

CREATE TABLE IF NOT EXISTS rota_schedule_runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    schedule_id      INTEGER NOT NULL REFERENCES rota_schedules (id) ON DELETE CASCADE,
    name             TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    scheduled_minute INTEGER,
    scheduled_at     REAL    NOT NULL,
    scheduled_local  TEXT    NOT NULL,
    -- Deleting the job (history limits, the pruner) deletes its run.
    job_id           INTEGER REFERENCES rota_jobs (id) ON DELETE CASCADE,
    scheduler        TEXT,
    created_at       REAL    NOT NULL,
    CHECK (kind IN ('scheduled', 'manual')),
    CHECK ((kind = 'scheduled') = (scheduled_minute IS NOT NULL)),
    UNIQUE (schedule_id, scheduled_minute),
    UNIQUE (schedule_id, name)
);

CREATE INDEX IF NOT EXISTS rota_schedule_runs_job_idx ON rota_schedule_runs (job_id);
