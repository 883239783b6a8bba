-- The lean claim (#16). A queue records whether its jobs may carry per-job gates (partition
-- keys, start deadlines, required labels): a plain queue is claimed by one lean statement
-- that pays for none of them, a gated one by the statement that checks them.
ALTER TABLE rota_queues ADD COLUMN gated INTEGER NOT NULL DEFAULT 0;
INSERT INTO rota_queues (name, paused, gated, updated_at)
SELECT DISTINCT queue, 0, 1, (julianday('now') - 2440587.5) * 86400.0 FROM rota_jobs
WHERE partition_key IS NOT NULL OR expires_at IS NOT NULL OR requires IS NOT NULL
ON CONFLICT (name) DO UPDATE SET gated = 1;

-- Every index must serve a query (docs/benchmarks.md lists which); see the PostgreSQL
-- migration of the same number.
DROP INDEX IF EXISTS rota_jobs_state_queue_idx;
DROP INDEX IF EXISTS rota_jobs_finished_idx;
DROP INDEX IF EXISTS rota_jobs_discarded_idx;
DROP INDEX IF EXISTS rota_jobs_lease_idx;
CREATE INDEX IF NOT EXISTS rota_jobs_finished_state_idx
    ON rota_jobs (state, finished_at, id) WHERE state IN ('completed', 'discarded', 'cancelled');
CREATE INDEX IF NOT EXISTS rota_jobs_running_idx
    ON rota_jobs (queue, lease_expires_at) WHERE state = 'running';
