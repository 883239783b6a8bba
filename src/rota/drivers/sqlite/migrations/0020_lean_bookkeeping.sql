-- Completions counted by the statement that writes them. The per-row trigger of 0019 cost
-- a drain about 4.5 us of every job's ~27 inside the write lock (a quarter of rota's SQL
-- on SQLite). A job that completes from running is now counted by job_complete_many (and
-- the claims that include it), once per queue and worker for the whole batch; the trigger
-- keeps every other move into or out of a finished state (a failure, a cancel, a rescue,
-- a retry or replay of a finished job, a prune). job_complete_many is the only statement
-- that moves a job from running to completed (tests/unit/test_kept_counts_sqlite.py).
DROP TRIGGER IF EXISTS rota_jobs_finished_change;
CREATE TRIGGER rota_jobs_finished_change AFTER UPDATE OF finished_at ON rota_jobs
WHEN (old.state IS NOT new.state OR old.queue IS NOT new.queue)
 AND NOT (old.state = 'running' AND new.state = 'completed')
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
