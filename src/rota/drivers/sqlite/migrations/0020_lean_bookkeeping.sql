-- Plain completions counted by the statement that writes them. The per-row trigger of 0019
-- cost a drain about 4.5 us of every job's ~27 inside the write lock (a quarter of rota's
-- SQL on SQLite). A job that completes from running with nothing to write but its finish
-- (job_complete_many's `p`: no result, no history entry of its own) is now counted by
-- job_complete_many, once per queue and worker for the whole batch, and no trigger counts
-- it (the first one's WHEN skips running -> completed; the update writes no `result`).
-- A completion that writes a result (job_complete_many's `c`, and every completion of an
-- older rota) is counted per row by rota_jobs_completed_row, on writes of `result`, so a
-- worker still running an older rota after `rota migrate` keeps the counts right. The
-- first trigger keeps every other move into or out of a finished state (a failure, a
-- cancel, a rescue, a retry or replay of a finished job, a prune).
-- job_complete_many is the only statement that moves a job from running to completed
-- (tests/unit/test_kept_counts_sqlite.py).
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
DROP TRIGGER IF EXISTS rota_jobs_completed_row;
CREATE TRIGGER rota_jobs_completed_row AFTER UPDATE OF result ON rota_jobs
WHEN old.state = 'running' AND new.state = 'completed'
BEGIN
    INSERT INTO rota_job_counts (queue, state, worker, n, entered, last_at)
    VALUES (new.queue, 'completed', COALESCE(new.worker, ''), 1, 1, new.finished_at)
    ON CONFLICT (queue, state, worker) DO UPDATE SET
        n = n + 1, entered = entered + 1, last_at = max(last_at, excluded.last_at);
END;
