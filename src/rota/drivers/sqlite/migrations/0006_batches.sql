-- Batches (Kubernetes Job semantics): the batch row holds the spec and the status the
-- controller keeps; one row per index (or item); one row per job a batch started.
-- Times are Unix seconds (REAL, UTC).
CREATE TABLE IF NOT EXISTS rota_batches (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    name                   TEXT UNIQUE,
    task                   TEXT    NOT NULL,
    queue                  TEXT    NOT NULL,
    priority               INTEGER NOT NULL DEFAULT 0,
    args                   TEXT    NOT NULL DEFAULT '{}',
    spec                   TEXT    NOT NULL,
    parallelism            INTEGER NOT NULL,
    suspended              INTEGER NOT NULL DEFAULT 0,
    on_finish              TEXT,
    on_finish_queue        TEXT,
    on_finish_priority     INTEGER NOT NULL DEFAULT 0,
    on_finish_max_attempts INTEGER NOT NULL DEFAULT 20,
    version                INTEGER NOT NULL DEFAULT 0,
    succeeded              INTEGER NOT NULL DEFAULT 0,
    failed                 INTEGER NOT NULL DEFAULT 0,
    ignored                INTEGER NOT NULL DEFAULT 0,
    fails_since_success    INTEGER NOT NULL DEFAULT 0,
    last_failure_at        REAL,
    interim                TEXT,
    interim_reason         TEXT,
    interim_message        TEXT,
    condition              TEXT CHECK (condition IN ('Complete', 'Failed')),
    reason                 TEXT,
    message                TEXT,
    created_at             REAL    NOT NULL,
    start_time             REAL,
    completion_time        REAL,
    finished_at            REAL,
    callback_job_id        INTEGER
);
CREATE INDEX IF NOT EXISTS rota_batches_open_idx ON rota_batches (id) WHERE condition IS NULL;
CREATE INDEX IF NOT EXISTS rota_batches_finished_idx
    ON rota_batches (finished_at) WHERE condition IS NOT NULL;

CREATE TABLE IF NOT EXISTS rota_batch_items (
    batch_id        INTEGER NOT NULL REFERENCES rota_batches (id) ON DELETE CASCADE,
    idx             INTEGER NOT NULL,
    args            TEXT,
    state           TEXT    NOT NULL DEFAULT 'pending'
        CHECK (state IN ('pending', 'active', 'succeeded', 'failed')),
    failures        INTEGER NOT NULL DEFAULT 0,
    last_failure_at REAL,
    job_id          INTEGER,
    PRIMARY KEY (batch_id, idx)
);

-- The indexes with a live attempt: counted by every read of a batch and by the controller's
-- pass, which must not scan a batch's (up to 100,000) finished indexes to count them.
CREATE INDEX IF NOT EXISTS rota_batch_items_active_idx
    ON rota_batch_items (batch_id) WHERE state = 'active';

CREATE TABLE IF NOT EXISTS rota_batch_jobs (
    job_id   INTEGER PRIMARY KEY,
    batch_id INTEGER NOT NULL REFERENCES rota_batches (id) ON DELETE CASCADE,
    idx      INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rota_batch_jobs_batch_idx ON rota_batch_jobs (batch_id);
