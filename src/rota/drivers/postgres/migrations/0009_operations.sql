-- Operating rota: partition keys and start deadlines on jobs, global concurrency and
-- rate limits on queues, the starts log the rate limit counts, and the replay audit.

-- Both columns are nullable without a default: adding them rewrites nothing.
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS partition_key text;
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS expires_at timestamptz;

-- The partition gate: "is there an earlier job of this key that is not done?" A discarded
-- job stays in the index: until it is replayed or dismissed it blocks its key.
CREATE INDEX IF NOT EXISTS rota_jobs_partition_idx
    ON rota_jobs (queue, partition_key, id)
    WHERE partition_key IS NOT NULL
      AND state IN ('scheduled', 'available', 'running', 'retryable', 'discarded');
-- The expiry sweep: waiting jobs with a start deadline.
CREATE INDEX IF NOT EXISTS rota_jobs_expiry_idx
    ON rota_jobs (expires_at)
    WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
-- Dead-letter listings by time.
CREATE INDEX IF NOT EXISTS rota_jobs_discarded_idx
    ON rota_jobs (finished_at, id) WHERE state = 'discarded';

-- Limits shared by every worker; NULL means unlimited (the claim's fast path).
ALTER TABLE rota_queues ADD COLUMN IF NOT EXISTS global_limit integer;
ALTER TABLE rota_queues ADD COLUMN IF NOT EXISTS rate_limit integer;
ALTER TABLE rota_queues ADD COLUMN IF NOT EXISTS rate_period double precision;
ALTER TABLE rota_queues DROP CONSTRAINT IF EXISTS rota_queues_limits_check;
ALTER TABLE rota_queues ADD CONSTRAINT rota_queues_limits_check CHECK (
    (global_limit IS NULL OR global_limit > 0)
    AND ((rate_limit IS NULL) = (rate_period IS NULL))
    AND (rate_limit IS NULL OR (rate_limit > 0 AND rate_period > 0)));

-- One row per claim of a rate-limited queue: the sliding window sums these. Kept apart
-- from rota_jobs so that no index on the hot table changes with every start.
CREATE TABLE IF NOT EXISTS rota_queue_starts (
    queue      text        NOT NULL,
    started_at timestamptz NOT NULL,
    n          integer     NOT NULL
);
CREATE INDEX IF NOT EXISTS rota_queue_starts_idx ON rota_queue_starts (queue, started_at);

-- Every replay of dead letters: who, when, why, what selection, how many, which jobs.
CREATE TABLE IF NOT EXISTS rota_replays (
    id         bigserial PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    principal  text        NOT NULL,
    reason     text        NOT NULL,
    selection  jsonb       NOT NULL,
    rate       double precision,
    count      integer     NOT NULL DEFAULT 0,
    job_ids    jsonb       NOT NULL DEFAULT '[]'::jsonb
);
