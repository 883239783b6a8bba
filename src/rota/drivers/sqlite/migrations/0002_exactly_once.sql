-- Idempotency keys that can be released (window or states), checkpoints, durable steps
-- and the inbox for messages from outside brokers.
ALTER TABLE rota_jobs ADD COLUMN key_active INTEGER NOT NULL DEFAULT 1;
ALTER TABLE rota_jobs ADD COLUMN checkpoint TEXT;

DROP INDEX IF EXISTS rota_jobs_key_idx;
CREATE UNIQUE INDEX IF NOT EXISTS rota_jobs_active_key_idx
    ON rota_jobs (task, key) WHERE key IS NOT NULL AND key_active;

CREATE TABLE IF NOT EXISTS rota_steps (
    job_id      INTEGER NOT NULL REFERENCES rota_jobs (id) ON DELETE CASCADE,
    name        TEXT    NOT NULL,
    result      TEXT,
    attempt     INTEGER NOT NULL,
    recorded_at REAL    NOT NULL,
    PRIMARY KEY (job_id, name)
);

CREATE TABLE IF NOT EXISTS rota_inbox (
    source      TEXT NOT NULL,
    message_id  TEXT NOT NULL,
    received_at REAL NOT NULL,
    PRIMARY KEY (source, message_id)
);
CREATE INDEX IF NOT EXISTS rota_inbox_received_idx ON rota_inbox (received_at);
