-- The job table, its indexes, queues and leadership.
CREATE TABLE IF NOT EXISTS rota_jobs (
    id               bigserial PRIMARY KEY,
    task             text        NOT NULL,
    queue            text        NOT NULL,
    args             jsonb       NOT NULL DEFAULT '{}'::jsonb,
    state            text        NOT NULL DEFAULT 'available',
    priority         smallint    NOT NULL DEFAULT 0,
    attempt          integer     NOT NULL DEFAULT 0,
    max_attempts     integer     NOT NULL,
    run_at           timestamptz NOT NULL DEFAULT now(),
    created_at       timestamptz NOT NULL DEFAULT now(),
    attempted_at     timestamptz,
    finished_at      timestamptz,
    key              text,
    worker           text,
    lease_token      uuid,
    lease_expires_at timestamptz,
    cancel_requested boolean     NOT NULL DEFAULT false,
    result           jsonb,
    history          jsonb       NOT NULL DEFAULT '[]'::jsonb,
    CONSTRAINT rota_jobs_state_check CHECK (state IN
        ('scheduled', 'available', 'running', 'retryable', 'completed', 'discarded', 'cancelled')),
    CONSTRAINT rota_jobs_attempts_check CHECK (max_attempts > 0 AND attempt >= 0),
    CONSTRAINT rota_jobs_lease_check CHECK ((state = 'running') = (lease_token IS NOT NULL))
);

-- The fetch: runnable jobs of one queue in priority, time, id order.
CREATE INDEX IF NOT EXISTS rota_jobs_fetch_idx
    ON rota_jobs (queue, priority, run_at, id) WHERE state = 'available';
-- The stager: jobs waiting for their time.
CREATE INDEX IF NOT EXISTS rota_jobs_due_idx
    ON rota_jobs (run_at) WHERE state IN ('scheduled', 'retryable');
-- The rescuer: leases that may have expired.
CREATE INDEX IF NOT EXISTS rota_jobs_lease_idx
    ON rota_jobs (lease_expires_at) WHERE state = 'running';
-- The pruner and listings of finished jobs.
CREATE INDEX IF NOT EXISTS rota_jobs_finished_idx
    ON rota_jobs (finished_at) WHERE state IN ('completed', 'discarded', 'cancelled');
CREATE INDEX IF NOT EXISTS rota_jobs_state_queue_idx ON rota_jobs (state, queue);
-- Idempotency keys: at most one job per (task, key), enforced by the database.
CREATE UNIQUE INDEX IF NOT EXISTS rota_jobs_key_idx
    ON rota_jobs (task, key) WHERE key IS NOT NULL;

-- Churny table: vacuum it sooner than the defaults so dead tuples from the
-- available -> running -> completed updates do not bloat the fetch index.
ALTER TABLE rota_jobs SET (
    autovacuum_vacuum_scale_factor = 0.02,
    autovacuum_analyze_scale_factor = 0.02,
    fillfactor = 90
);

CREATE TABLE IF NOT EXISTS rota_queues (
    name       text PRIMARY KEY,
    paused     boolean     NOT NULL DEFAULT false,
    updated_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS rota_leaders (
    name       text PRIMARY KEY,
    leader     text        NOT NULL,
    elected_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL
);
