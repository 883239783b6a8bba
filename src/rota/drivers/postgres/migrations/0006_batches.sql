-- Batches (Kubernetes Job semantics): the batch row holds the spec and the status the
-- controller keeps; one row per index (or item); one row per job a batch started.
CREATE TABLE IF NOT EXISTS rota_batches (
    id                     bigserial PRIMARY KEY,
    name                   text UNIQUE,
    task                   text        NOT NULL,
    queue                  text        NOT NULL,
    priority               smallint    NOT NULL DEFAULT 0,
    args                   jsonb       NOT NULL DEFAULT '{}'::jsonb,
    spec                   jsonb       NOT NULL,
    parallelism            integer     NOT NULL,
    suspended              boolean     NOT NULL DEFAULT false,
    on_finish              text,
    on_finish_queue        text,
    on_finish_priority     smallint    NOT NULL DEFAULT 0,
    on_finish_max_attempts integer     NOT NULL DEFAULT 20,
    version                bigint      NOT NULL DEFAULT 0,
    succeeded              integer     NOT NULL DEFAULT 0,
    failed                 integer     NOT NULL DEFAULT 0,
    ignored                integer     NOT NULL DEFAULT 0,
    fails_since_success    integer     NOT NULL DEFAULT 0,
    last_failure_at        timestamptz,
    interim                text,
    interim_reason         text,
    interim_message        text,
    condition              text,
    reason                 text,
    message                text,
    created_at             timestamptz NOT NULL DEFAULT now(),
    start_time             timestamptz,
    completion_time        timestamptz,
    finished_at            timestamptz,
    callback_job_id        bigint,
    CONSTRAINT rota_batches_condition_check CHECK (condition IN ('Complete', 'Failed'))
);
-- The controller's pass: unfinished batches; the TTL pruner: finished ones.
CREATE INDEX IF NOT EXISTS rota_batches_open_idx ON rota_batches (id) WHERE condition IS NULL;
CREATE INDEX IF NOT EXISTS rota_batches_finished_idx
    ON rota_batches (finished_at) WHERE condition IS NOT NULL;

CREATE TABLE IF NOT EXISTS rota_batch_items (
    batch_id        bigint      NOT NULL REFERENCES rota_batches (id) ON DELETE CASCADE,
    idx             integer     NOT NULL,
    args            jsonb,
    state           text        NOT NULL DEFAULT 'pending',
    failures        integer     NOT NULL DEFAULT 0,
    last_failure_at timestamptz,
    job_id          bigint,
    PRIMARY KEY (batch_id, idx),
    CONSTRAINT rota_batch_items_state_check
        CHECK (state IN ('pending', 'active', 'succeeded', 'failed'))
);

-- The indexes with a live attempt: counted by every read of a batch and by the controller's
-- pass, which must not scan a batch's (up to 100,000) finished indexes to count them.
CREATE INDEX IF NOT EXISTS rota_batch_items_active_idx
    ON rota_batch_items (batch_id) WHERE state = 'active';

-- Every job a batch started (one per attempt), so TTL pruning can delete them with it.
CREATE TABLE IF NOT EXISTS rota_batch_jobs (
    job_id   bigint  PRIMARY KEY,
    batch_id bigint  NOT NULL REFERENCES rota_batches (id) ON DELETE CASCADE,
    idx      integer NOT NULL
);
CREATE INDEX IF NOT EXISTS rota_batch_jobs_batch_idx ON rota_batch_jobs (batch_id);
