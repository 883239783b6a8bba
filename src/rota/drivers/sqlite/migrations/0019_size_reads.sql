-- Reads that cost what they show (#23): the dashboard and /metrics read the finished jobs
-- per queue and state, throughput per minute and the workers seen from small tables, not
-- from a count over every row; the waiting and running jobs are counted from their own
-- indexes (as many as the backlog). SQLite runs a trigger per row, and a trigger costs
-- each row it runs for ~3 us, each statement in it ~2 us more, so they do the least: only
-- a write of finished_at (a job finishing, or a finished job run again) runs one, which
-- updates one counter row per queue, state and worker (how many, how many ever, when the
-- last finished); a claim, an enqueue, a lease renewal or a progress write runs none. The
-- leader's pass turns the counters' growth, and the ids enqueued since its last pass, into
-- throughput per minute (PostgreSQL appends per-statement deltas that its leader folds).
CREATE TABLE IF NOT EXISTS rota_job_counts (
    queue   TEXT    NOT NULL,
    state   TEXT    NOT NULL,  -- a finished state
    worker  TEXT    NOT NULL,  -- who finished the jobs ('' for none)
    n       INTEGER NOT NULL,  -- jobs in the state now
    entered INTEGER NOT NULL,  -- jobs that ever entered it
    last_at REAL,              -- when the last of them finished
    PRIMARY KEY (queue, state, worker)
) WITHOUT ROWID;

-- The counters' `entered` as the leader's last pass saw them; the row ('', 'enqueued', '')
-- holds the highest job id it had counted as enqueued.
CREATE TABLE IF NOT EXISTS rota_job_marks (
    queue   TEXT    NOT NULL,
    state   TEXT    NOT NULL,
    worker  TEXT    NOT NULL,
    entered INTEGER NOT NULL,
    PRIMARY KEY (queue, state, worker)
) WITHOUT ROWID;

CREATE TABLE IF NOT EXISTS rota_job_flow (
    minute INTEGER NOT NULL,  -- Unix seconds of a whole minute
    queue  TEXT    NOT NULL,
    kind   TEXT    NOT NULL,  -- enqueued, completed, discarded, cancelled
    n      INTEGER NOT NULL,
    PRIMARY KEY (minute, queue, kind)
) WITHOUT ROWID;

DELETE FROM rota_job_counts;
DELETE FROM rota_job_marks;
INSERT INTO rota_job_counts (queue, state, worker, n, entered, last_at)
SELECT queue, state, COALESCE(worker, ''), count(*), count(*), max(finished_at) FROM rota_jobs
WHERE state IN ('completed', 'discarded', 'cancelled') GROUP BY queue, state, 3;
INSERT INTO rota_job_marks (queue, state, worker, entered)
SELECT queue, state, worker, entered FROM rota_job_counts;
INSERT INTO rota_job_marks (queue, state, worker, entered)
SELECT '', 'enqueued', '', COALESCE(max(id), 0) FROM rota_jobs;
-- The last day of throughput and of workers, so the charts do not start empty.
INSERT INTO rota_job_flow (minute, queue, kind, n)
SELECT CAST(created_at / 60 AS INTEGER) * 60 AS m, queue, 'enqueued', count(*) FROM rota_jobs
WHERE created_at >= (julianday('now') - 2440587.5) * 86400.0 - 86400 GROUP BY m, queue
ON CONFLICT (minute, queue, kind) DO UPDATE SET n = excluded.n;
INSERT INTO rota_job_flow (minute, queue, kind, n)
SELECT CAST(finished_at / 60 AS INTEGER) * 60 AS m, queue, state, count(*) FROM rota_jobs
WHERE state IN ('completed', 'discarded', 'cancelled')
  AND finished_at >= (julianday('now') - 2440587.5) * 86400.0 - 86400
GROUP BY m, queue, state
ON CONFLICT (minute, queue, kind) DO UPDATE SET n = excluded.n;
DROP TRIGGER IF EXISTS rota_jobs_finished_insert;
DROP TRIGGER IF EXISTS rota_jobs_finished_change;
DROP TRIGGER IF EXISTS rota_jobs_finished_delete;
-- A job inserted finished (a copy from another database).
CREATE TRIGGER rota_jobs_finished_insert AFTER INSERT ON rota_jobs
WHEN new.state IN ('completed', 'discarded', 'cancelled')
BEGIN
    INSERT INTO rota_job_counts (queue, state, worker, n, entered, last_at)
    VALUES (new.queue, new.state, COALESCE(new.worker, ''), 1, 1, new.finished_at)
    ON CONFLICT (queue, state, worker) DO UPDATE SET
        n = n + 1, entered = entered + 1, last_at = max(last_at, excluded.last_at);
END;
-- A job that finishes, or a finished one run again (retry, replay): every statement that
-- moves a job into or out of a finished state writes finished_at
-- (tests/unit/test_kept_counts_sqlite.py), and a claim does not, so it runs none.
CREATE TRIGGER rota_jobs_finished_change AFTER UPDATE OF finished_at ON rota_jobs
WHEN old.state IS NOT new.state OR old.queue IS NOT new.queue
BEGIN
    UPDATE rota_job_counts SET n = n - 1
    WHERE old.state IN ('completed', 'discarded', 'cancelled')
      AND queue = old.queue AND state = old.state AND worker = COALESCE(old.worker, '');
    INSERT INTO rota_job_counts (queue, state, worker, n, entered, last_at)
    SELECT new.queue, new.state, COALESCE(new.worker, ''), 1, 1, new.finished_at
    WHERE new.state IN ('completed', 'discarded', 'cancelled')
    ON CONFLICT (queue, state, worker) DO UPDATE SET
        n = n + 1, entered = entered + 1, last_at = max(last_at, excluded.last_at);
END;
CREATE TRIGGER rota_jobs_finished_delete AFTER DELETE ON rota_jobs
WHEN old.state IN ('completed', 'discarded', 'cancelled')
BEGIN
    UPDATE rota_job_counts SET n = n - 1
    WHERE queue = old.queue AND state = old.state AND worker = COALESCE(old.worker, '');
END;

-- Dead letters and cancelled jobs newest first (the dead-letter page, a listing by state);
-- only jobs entering or leaving these states write this index.
CREATE INDEX IF NOT EXISTS rota_jobs_failed_id_idx
    ON rota_jobs (state, id) WHERE state IN ('discarded', 'cancelled');
-- Search by idempotency key, whatever the task and whether the key is still held.
CREATE INDEX IF NOT EXISTS rota_jobs_key_search_idx ON rota_jobs (key) WHERE key IS NOT NULL;
