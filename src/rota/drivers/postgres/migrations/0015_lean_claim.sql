-- The lean claim (#16). A queue records whether its jobs may carry per-job gates (partition
-- keys, start deadlines, required labels): a plain queue is claimed by one lean statement
-- that pays for none of them, a gated one by the statement that checks them.
ALTER TABLE rota_queues ADD COLUMN IF NOT EXISTS gated boolean NOT NULL DEFAULT false;
INSERT INTO rota_queues (name, paused, gated, updated_at)
SELECT DISTINCT queue, false, true, now() FROM rota_jobs
WHERE partition_key IS NOT NULL OR expires_at IS NOT NULL OR requires IS NOT NULL
ON CONFLICT (name) DO UPDATE SET gated = true;

-- Every index must serve a query (docs/benchmarks.md lists which). The full (state, queue)
-- index was updated by every state change and read by nothing on the hot path; the
-- finished jobs are read by state (the pruner per state, the dead letters), so the state
-- leads their index; the running jobs are counted per queue (limits, KEDA) and scanned by
-- the rescuer, a set no larger than the workers' slots.
DROP INDEX IF EXISTS rota_jobs_state_queue_idx;
DROP INDEX IF EXISTS rota_jobs_finished_idx;
DROP INDEX IF EXISTS rota_jobs_discarded_idx;
DROP INDEX IF EXISTS rota_jobs_lease_idx;
CREATE INDEX IF NOT EXISTS rota_jobs_finished_state_idx
    ON rota_jobs (state, finished_at, id) WHERE state IN ('completed', 'discarded', 'cancelled');
CREATE INDEX IF NOT EXISTS rota_jobs_running_idx
    ON rota_jobs (queue, lease_expires_at) WHERE state = 'running';
