-- SQLite has no functions to ship for KEDA (its postgresql scaler cannot read SQLite):
-- this migration keeps the numbering equal across dialects and adds the index that serves
-- the "waiting and due" part of `rota scale-hint`'s backlog count, as on PostgreSQL.
CREATE INDEX IF NOT EXISTS rota_jobs_due_queue_idx
    ON rota_jobs (queue, run_at) WHERE state IN ('scheduled', 'retryable');
