-- The last per-row IN lists on rota_jobs (see 0021): its `CHECK (state IN (...))`, run for
-- every row a claim or a completion writes, and the body of rota_jobs_finished_change, run
-- for every failure, retry, cancel and rescue. A CHECK cannot be altered with SQL short of
-- rebuilding the table, so the CHECK's part is the Python edit `state_check_as_or_chain`
-- (rota/drivers/sqlite/schema_edits.py), which the migration runner applies after these
-- statements in the same transaction. In a loop of rota's claim and completion (40,000
-- jobs, batches of 400) the CHECK as an OR chain took 38-40k to 42-49k jobs/s; the CLI
-- drain (two processes) gained about 5%.
DROP TRIGGER IF EXISTS rota_jobs_finished_change;
CREATE TRIGGER rota_jobs_finished_change AFTER UPDATE OF finished_at ON rota_jobs
WHEN (old.state IS NOT new.state OR old.queue IS NOT new.queue)
 AND NOT (old.state = 'running' AND new.state = 'completed')
BEGIN
    UPDATE rota_job_counts SET n = n - 1
    WHERE (old.state = 'completed' OR old.state = 'discarded' OR old.state = 'cancelled')
      AND queue = old.queue AND state = old.state AND worker = COALESCE(old.worker, '');
    INSERT INTO rota_job_counts (queue, state, worker, n, entered, last_at)
    SELECT new.queue, new.state, COALESCE(new.worker, ''), 1, 1, new.finished_at
    WHERE (new.state = 'completed' OR new.state = 'discarded' OR new.state = 'cancelled')
    ON CONFLICT (queue, state, worker) DO UPDATE SET
        n = n + 1, entered = entered + 1, last_at = max(last_at, excluded.last_at);
END;
