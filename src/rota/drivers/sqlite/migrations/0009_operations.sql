-- Operating rota: partition keys and start deadlines on jobs, global concurrency and
-- rate limits on queues, the starts log the rate limit counts, and the replay audit.
ALTER TABLE rota_jobs ADD COLUMN partition_key TEXT;
ALTER TABLE rota_jobs ADD COLUMN expires_at REAL;

CREATE INDEX IF NOT EXISTS rota_jobs_partition_idx
    ON rota_jobs (queue, partition_key, id)
    WHERE partition_key IS NOT NULL
      AND state IN ('scheduled', 'available', 'running', 'retryable', 'discarded');
CREATE INDEX IF NOT EXISTS rota_jobs_expiry_idx
    ON rota_jobs (expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
CREATE INDEX IF NOT EXISTS rota_jobs_discarded_idx
    ON rota_jobs (finished_at, id) WHERE state = 'discarded';

ALTER TABLE rota_queues ADD COLUMN global_limit INTEGER CHECK (global_limit IS NULL OR global_limit > 0);
ALTER TABLE rota_queues ADD COLUMN rate_limit INTEGER CHECK (rate_limit IS NULL OR rate_limit > 0);
ALTER TABLE rota_queues ADD COLUMN rate_period REAL CHECK (rate_period IS NULL OR rate_period > 0);

CREATE TABLE IF NOT EXISTS rota_queue_starts (
    queue      TEXT    NOT NULL,
    started_at REAL    NOT NULL,
    n          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS rota_queue_starts_idx ON rota_queue_starts (queue, started_at);

CREATE TABLE IF NOT EXISTS rota_replays (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL    NOT NULL,
    principal  TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    selection  TEXT    NOT NULL,
    rate       REAL,
    count      INTEGER NOT NULL DEFAULT 0,
    job_ids    TEXT    NOT NULL DEFAULT '[]'
);
