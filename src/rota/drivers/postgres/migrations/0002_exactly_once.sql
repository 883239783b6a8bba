-- Idempotency keys that can be released (window or states), checkpoints, durable steps
-- and the inbox for messages from outside brokers.
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS key_active boolean NOT NULL DEFAULT true;
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS checkpoint jsonb;

-- A key blocks a second job only while active; an expired or released key stays on its
-- job for display but no longer takes part in the uniqueness.
DROP INDEX IF EXISTS rota_jobs_key_idx;
CREATE UNIQUE INDEX IF NOT EXISTS rota_jobs_active_key_idx
    ON rota_jobs (task, key) WHERE key IS NOT NULL AND key_active;

CREATE TABLE IF NOT EXISTS rota_steps (
    job_id      bigint      NOT NULL REFERENCES rota_jobs (id) ON DELETE CASCADE,
    name        text        NOT NULL,
    result      jsonb,
    attempt     integer     NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (job_id, name)
);

CREATE TABLE IF NOT EXISTS rota_inbox (
    source      text        NOT NULL,
    message_id  text        NOT NULL,
    received_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (source, message_id)
);
CREATE INDEX IF NOT EXISTS rota_inbox_received_idx ON rota_inbox (received_at);
