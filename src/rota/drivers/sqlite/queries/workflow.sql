-- name: workflow_insert
-- A new workflow run; a run with the same key wins (no row returned).
INSERT INTO rota_workflows (name, key, state, on_failure, spec, args, version, created_at,
                            updated_at)
VALUES (:name, :key, 'running', :on_failure, :spec, :args, 0,
        (julianday('now') - 2440587.5) * 86400.0, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (key) DO NOTHING
RETURNING *

-- name: workflow_get
-- One workflow run by id.
SELECT * FROM rota_workflows WHERE id = :id

-- name: workflow_get_by_key
-- One workflow run by its idempotency key.
SELECT * FROM rota_workflows WHERE key = :key

-- name: workflow_list
-- Workflow runs matching optional filters, newest first.
SELECT * FROM rota_workflows
WHERE (:states IS NULL OR json_array_length(:states) = 0
       OR state IN (SELECT value FROM json_each(:states)))
  AND (:name IS NULL OR name = :name)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC
LIMIT :limit

-- name: workflow_list_running
-- A page of the running workflows after id `after`, oldest first: what a controller pass reads.
SELECT * FROM rota_workflows WHERE state = 'running' AND id > :after ORDER BY id LIMIT :limit

-- name: workflow_bump
-- Take the next version (and maybe a new state) if the run is still at `version`.
UPDATE rota_workflows
SET version = version + 1,
    state = COALESCE(:state, state),
    error = CASE WHEN :state IS NULL THEN error ELSE :error END,
    finished_at = CASE WHEN :state IS NULL THEN finished_at
                       WHEN :state = 'running' THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 END,
    updated_at = (julianday('now') - 2440587.5) * 86400.0
WHERE id = :id AND version = :version
RETURNING id

-- name: workflow_step_insert
-- One step of a new run, waiting for its parents.
INSERT INTO rota_workflow_steps (workflow_id, step, position, state)
VALUES (:workflow_id, :step, :position, 'pending')

-- name: workflow_step_update
-- Move a step to a new state, with its job count, result or error.
UPDATE rota_workflow_steps
SET state = :state,
    total = :total,
    result = :result,
    error = :error,
    started_at = CASE WHEN :state = 'pending' THEN NULL
                      WHEN :state = 'running'
                      THEN COALESCE(started_at, (julianday('now') - 2440587.5) * 86400.0)
                      ELSE started_at END,
    finished_at = CASE WHEN :state IN ('pending', 'running') THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 END
WHERE workflow_id = :workflow_id AND step = :step

-- name: workflow_step_list
-- The steps of the given workflows, in run order.
SELECT * FROM rota_workflow_steps
WHERE workflow_id IN (SELECT value FROM json_each(:ids))
ORDER BY workflow_id, position

-- name: workflow_job_insert
-- Link the jobs of new elements (a JSON array of objects); an element that exists already
-- links nothing (its job was inserted before), so fewer rows come back than went in.
INSERT INTO rota_workflow_jobs (workflow_id, step, idx, job_id, state)
SELECT :workflow_id, json_extract(value, '$.step'), json_extract(value, '$.idx'),
       json_extract(value, '$.job_id'), 'pending'
FROM json_each(:e) WHERE true
ON CONFLICT (workflow_id, step, idx) DO NOTHING
RETURNING idx

-- name: workflow_job_update
-- Record a step job's outcome (or reset it to pending for a retry).
UPDATE rota_workflow_jobs
SET state = :state,
    result = :result,
    error = :error,
    finished_at = CASE WHEN :state = 'pending' THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 END
WHERE workflow_id = :workflow_id AND step = :step AND idx = :idx

-- name: workflow_job_list
-- The jobs of the given workflows' steps (only of running steps, if asked), with the
-- job's state now and its last attempt's error.
SELECT e.workflow_id, e.step, e.idx, e.job_id, e.state, e.result, e.error,
       j.state AS job_state, j.result AS job_result, j.attempt AS attempt,
       json_extract(last.value, '$.error_type') AS error_type,
       json_extract(last.value, '$.message') AS error_message
FROM rota_workflow_jobs e
JOIN rota_workflow_steps s ON s.workflow_id = e.workflow_id AND s.step = e.step
LEFT JOIN rota_jobs j ON j.id = e.job_id
-- The last stored entry, unless a completed job's last attempt is newer (its entry is implied,
-- not stored: COMPLETED_ENTRY in rota.drivers.base).
LEFT JOIN json_each(j.history) AS last
  ON last.key = json_array_length(j.history) - 1
 AND (j.state <> 'completed' OR json_extract(last.value, '$.attempt') = j.attempt)
WHERE e.workflow_id IN (SELECT value FROM json_each(:ids))
  AND (:running_only = 0 OR s.state = 'running')
ORDER BY e.workflow_id, e.step, e.idx

-- name: workflow_job_cancel
-- Cancel a step's waiting job now, or ask a running one to stop (as job_cancel does).
-- moves: scheduled, available, retryable -> cancelled
-- moves: running -> running
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 END
WHERE id = :id AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING id

-- name: workflow_job_retry
-- Run a failed step job again now, with `budget` more attempts.
-- moves: discarded, cancelled -> available
UPDATE rota_jobs
SET state = 'available',
    run_at = (julianday('now') - 2440587.5) * 86400.0,
    finished_at = NULL,
    cancel_requested = 0,
    max_attempts = attempt + :budget
WHERE id = :id AND (state = 'discarded' OR state = 'cancelled')
RETURNING id

-- name: workflow_tick_of_job
-- The schedule run that enqueued a job, if any (a workflow started by cron keys on it).
SELECT s.name AS schedule, r.name AS run, r.kind AS kind, r.scheduled_local AS scheduled_local
FROM rota_schedule_runs r JOIN rota_schedules s ON s.id = r.schedule_id
WHERE r.job_id = :job_id

-- name: workflow_prune_finished
-- Delete finished runs past their retention (their steps and job links go with them).
DELETE FROM rota_workflows WHERE id IN (
    SELECT id FROM rota_workflows
    WHERE (state IN ('completed', 'cancelled')
           AND finished_at < (julianday('now') - 2440587.5) * 86400.0 - :completed_age)
       OR (state = 'failed'
           AND finished_at < (julianday('now') - 2440587.5) * 86400.0 - :failed_age)
    LIMIT :limit
)
