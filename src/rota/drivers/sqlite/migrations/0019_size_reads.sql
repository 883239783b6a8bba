-- Reads that cost what they show (#23): the dashboard and /metrics read jobs per queue and
-- state, throughput per minute and the workers seen from small tables kept by triggers on
-- rota_jobs, not from a count over every row. SQLite has one writer at a time, so a row
-- trigger updates them in place (PostgreSQL appends deltas instead, which its leader
-- folds, so that concurrent writers never wait on a counter row).
CREATE TABLE IF NOT EXISTS rota_job_counts (
    queue TEXT    NOT NULL,
    state TEXT    NOT NULL,
    n     INTEGER NOT NULL,
    PRIMARY KEY (queue, state)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS rota_job_flow (
    minute REAL    NOT NULL,  -- Unix seconds, a whole minute
    queue  TEXT    NOT NULL,
    kind   TEXT    NOT NULL,  -- enqueued, completed, discarded, cancelled
    n      INTEGER NOT NULL,
    PRIMARY KEY (minute, queue, kind)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS rota_workers_seen (
    worker    TEXT NOT NULL,
    queue     TEXT NOT NULL,
    last_seen REAL NOT NULL,
    PRIMARY KEY (worker, queue)
) WITHOUT ROWID;

DELETE FROM rota_job_counts;
INSERT INTO rota_job_counts (queue, state, n)
SELECT queue, state, count(*) FROM rota_jobs GROUP BY queue, state;
-- The last day of throughput and of workers, so the charts do not start empty.
INSERT INTO rota_job_flow (minute, queue, kind, n)
SELECT CAST(created_at / 60 AS INTEGER) * 60.0 AS m, queue, 'enqueued', count(*) FROM rota_jobs
WHERE created_at >= (julianday('now') - 2440587.5) * 86400.0 - 86400 GROUP BY m, queue
ON CONFLICT (minute, queue, kind) DO UPDATE SET n = excluded.n;
INSERT INTO rota_job_flow (minute, queue, kind, n)
SELECT CAST(finished_at / 60 AS INTEGER) * 60.0 AS m, queue, state, count(*) FROM rota_jobs
WHERE state IN ('completed', 'discarded', 'cancelled')
  AND finished_at >= (julianday('now') - 2440587.5) * 86400.0 - 86400
GROUP BY m, queue, state
ON CONFLICT (minute, queue, kind) DO UPDATE SET n = excluded.n;
INSERT INTO rota_workers_seen (worker, queue, last_seen)
SELECT worker, queue, max(attempted_at) FROM rota_jobs
WHERE worker IS NOT NULL AND attempted_at >= (julianday('now') - 2440587.5) * 86400.0 - 86400
GROUP BY worker, queue
ON CONFLICT (worker, queue) DO UPDATE SET last_seen = excluded.last_seen;

DROP TRIGGER IF EXISTS rota_jobs_counted_insert;
DROP TRIGGER IF EXISTS rota_jobs_counted_update;
DROP TRIGGER IF EXISTS rota_jobs_counted_delete;
CREATE TRIGGER rota_jobs_counted_insert AFTER INSERT ON rota_jobs
BEGIN
    INSERT INTO rota_job_counts (queue, state, n) VALUES (new.queue, new.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
    INSERT INTO rota_job_flow (minute, queue, kind, n)
    VALUES (CAST(new.created_at / 60 AS INTEGER) * 60.0, new.queue, 'enqueued', 1)
    ON CONFLICT (minute, queue, kind) DO UPDATE SET n = n + 1;
END;
-- Only a change of state (or queue) runs it: a lease renewal or a progress write does not.
CREATE TRIGGER rota_jobs_counted_update AFTER UPDATE OF state, queue ON rota_jobs
WHEN old.state IS NOT new.state OR old.queue IS NOT new.queue
BEGIN
    UPDATE rota_job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
    INSERT INTO rota_job_counts (queue, state, n) VALUES (new.queue, new.state, 1)
    ON CONFLICT (queue, state) DO UPDATE SET n = n + 1;
    INSERT INTO rota_job_flow (minute, queue, kind, n)
    SELECT CAST(new.finished_at / 60 AS INTEGER) * 60.0, new.queue, new.state, 1
    WHERE new.state IN ('completed', 'discarded', 'cancelled') AND new.finished_at IS NOT NULL
    ON CONFLICT (minute, queue, kind) DO UPDATE SET n = n + 1;
    INSERT INTO rota_workers_seen (worker, queue, last_seen)
    SELECT new.worker, new.queue, new.attempted_at
    WHERE new.state = 'running' AND new.worker IS NOT NULL AND new.attempted_at IS NOT NULL
    ON CONFLICT (worker, queue) DO UPDATE SET last_seen = max(last_seen, excluded.last_seen);
END;
CREATE TRIGGER rota_jobs_counted_delete AFTER DELETE ON rota_jobs
BEGIN
    UPDATE rota_job_counts SET n = n - 1 WHERE queue = old.queue AND state = old.state;
END;

-- Dead letters and cancelled jobs newest first (the dead-letter page, a listing by state);
-- only jobs entering or leaving these states write this index.
CREATE INDEX IF NOT EXISTS rota_jobs_failed_id_idx
    ON rota_jobs (state, id) WHERE state IN ('discarded', 'cancelled');
-- Search by idempotency key, whatever the task and whether the key is still held.
CREATE INDEX IF NOT EXISTS rota_jobs_key_search_idx ON rota_jobs (key) WHERE key IS NOT NULL;
