-- The job table, its indexes, queues and leadership. Times are Unix seconds (REAL, UTC).
CREATE TABLE IF NOT EXISTS rota_jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    task             TEXT    NOT NULL,
    queue            TEXT    NOT NULL,
    args             TEXT    NOT NULL DEFAULT '{}',
    state            TEXT    NOT NULL DEFAULT 'available',
    priority         INTEGER NOT NULL DEFAULT 0,
    attempt          INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    run_at           REAL    NOT NULL,
    created_at       REAL    NOT NULL,
    attempted_at     REAL,
    finished_at      REAL,
    key              TEXT,
    worker           TEXT,
    lease_token      TEXT,
    lease_expires_at REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    result           TEXT,
    history          TEXT    NOT NULL DEFAULT '[]',
    CHECK (state IN
        ('scheduled', 'available', 'running', 'retryable', 'completed', 'discarded', 'cancelled')),
    CHECK (max_attempts > 0 AND attempt >= 0),
    CHECK ((state = 'running') = (lease_token IS NOT NULL))
);

CREATE INDEX IF NOT EXISTS rota_jobs_fetch_idx
    ON rota_jobs (queue, priority, run_at, id) WHERE state = 'available';
CREATE INDEX IF NOT EXISTS rota_jobs_due_idx
    ON rota_jobs (run_at) WHERE state IN ('scheduled', 'retryable');
CREATE INDEX IF NOT EXISTS rota_jobs_lease_idx
    ON rota_jobs (lease_expires_at) WHERE state = 'running';
CREATE INDEX IF NOT EXISTS rota_jobs_finished_idx
    ON rota_jobs (finished_at) WHERE state IN ('completed', 'discarded', 'cancelled');
CREATE INDEX IF NOT EXISTS rota_jobs_state_queue_idx ON rota_jobs (state, queue);
CREATE UNIQUE INDEX IF NOT EXISTS rota_jobs_key_idx
    ON rota_jobs (task, key) WHERE key IS NOT NULL;

CREATE TABLE IF NOT EXISTS rota_queues (
    name       TEXT PRIMARY KEY,
    paused     INTEGER NOT NULL DEFAULT 0,
    updated_at REAL    NOT NULL
);

CREATE TABLE IF NOT EXISTS rota_leaders (
    name       TEXT PRIMARY KEY,
    leader     TEXT NOT NULL,
    elected_at REAL NOT NULL,
    expires_at REAL NOT NULL
);
