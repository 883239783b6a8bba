-- Reads that cost what they show (#23). PostgreSQL keeps counts per queue and state, the
-- flow per minute and the workers seen in tables of their own, from statement triggers;
-- SQLite keeps reading rota_jobs for them (a row trigger per state change would cost its
-- single writer more than the reads it saves: docs/benchmarks.md#size). Both get the
-- indexes the searches need.

-- Dead letters and cancelled jobs newest first (the dead-letter page, the overview's
-- failures, a jobs listing by state); only jobs entering or leaving these states write it.
CREATE INDEX IF NOT EXISTS rota_jobs_failed_id_idx
    ON rota_jobs (state, id) WHERE state IN ('discarded', 'cancelled');
-- Search by idempotency key, whatever the task and whether the key is still held.
CREATE INDEX IF NOT EXISTS rota_jobs_key_search_idx ON rota_jobs (key) WHERE key IS NOT NULL;
