-- name: workflow_insert
-- A new workflow run; a run with the same key wins (no row returned).
INSERT INTO rota_workflows (name, key, state, on_failure, spec, args, version)
VALUES (%(name)s, %(key)s, 'running', %(on_failure)s, %(spec)s::jsonb, %(args)s::jsonb, 0)
ON CONFLICT (key) DO NOTHING
RETURNING *

-- name: workflow_get
-- One workflow run by id.
SELECT * FROM rota_workflows WHERE id = %(id)s

-- name: workflow_get_by_key
-- One workflow run by its idempotency key.
SELECT * FROM rota_workflows WHERE key = %(key)s

-- name: workflow_list
-- Workflow runs matching optional filters, newest first.
SELECT * FROM rota_workflows
WHERE (cardinality(%(states)s::text[]) = 0 OR state = ANY(%(states)s::text[]))
  AND (%(name)s::text IS NULL OR name = %(name)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s

-- name: workflow_list_running
-- A page of the running workflows after id `after`, oldest first: what a controller pass reads.
SELECT * FROM rota_workflows WHERE state = 'running' AND id > %(after)s ORDER BY id
LIMIT %(limit)s

-- name: workflow_bump
-- Take the next version (and maybe a new state) if the run is still at `version`.
-- A concurrent bump waits on the row lock, then finds the version moved: no row.
UPDATE rota_workflows
SET version = version + 1,
    state = COALESCE(%(state)s::text, state),
    error = CASE WHEN %(state)s::text IS NULL THEN error ELSE %(error)s::text END,
    finished_at = CASE WHEN %(state)s::text IS NULL THEN finished_at
                       WHEN %(state)s::text = 'running' THEN NULL
                       ELSE now() END,
    updated_at = now()
WHERE id = %(id)s AND version = %(version)s
RETURNING id

-- name: workflow_step_insert
-- One step of a new run, waiting for its parents.
INSERT INTO rota_workflow_steps (workflow_id, step, position, state)
VALUES (%(workflow_id)s, %(step)s, %(position)s, 'pending')

-- name: workflow_step_update
-- Move a step to a new state, with its job count, result or error.
UPDATE rota_workflow_steps
SET state = %(state)s::text,
    total = %(total)s,
    result = %(result)s::jsonb,
    error = %(error)s::text,
    started_at = CASE WHEN %(state)s::text = 'pending' THEN NULL
                      WHEN %(state)s::text = 'running' THEN COALESCE(started_at, now())
                      ELSE started_at END,
    finished_at = CASE WHEN %(state)s::text IN ('pending', 'running') THEN NULL ELSE now() END
WHERE workflow_id = %(workflow_id)s AND step = %(step)s

-- name: workflow_step_list
-- The steps of the given workflows, in run order.
SELECT * FROM rota_workflow_steps
WHERE workflow_id = ANY(%(ids)s::bigint[])
ORDER BY workflow_id, position

-- name: workflow_job_insert
-- Link the jobs of new elements, one row each; an element that exists already links
-- nothing (its job was inserted before), so fewer rows come back than went in.
INSERT INTO rota_workflow_jobs (workflow_id, step, idx, job_id, state)
SELECT %(workflow_id)s, e.step, e.idx, e.job_id, 'pending'
FROM unnest(%(e_step)s::text[], %(e_idx)s::int[], %(e_job_id)s::bigint[]) AS e(step, idx, job_id)
ON CONFLICT (workflow_id, step, idx) DO NOTHING
RETURNING idx

-- name: workflow_job_update
-- Record a step job's outcome (or reset it to pending for a retry).
UPDATE rota_workflow_jobs
SET state = %(state)s::text,
    result = %(result)s::jsonb,
    error = %(error)s::text,
    finished_at = CASE WHEN %(state)s::text = 'pending' THEN NULL ELSE now() END
WHERE workflow_id = %(workflow_id)s AND step = %(step)s AND idx = %(idx)s

-- name: workflow_job_list
-- The jobs of the given workflows' steps (only of running steps, if asked), with the
-- job's state now and its last attempt's error.
SELECT e.workflow_id, e.step, e.idx, e.job_id, e.state, e.result, e.error,
       j.state AS job_state, j.result AS job_result, j.attempt AS attempt,
       last.entry ->> 'error_type' AS error_type,
       last.entry ->> 'message' AS error_message
FROM rota_workflow_jobs e
JOIN rota_workflow_steps s ON s.workflow_id = e.workflow_id AND s.step = e.step
LEFT JOIN rota_jobs j ON j.id = e.job_id
-- The last stored entry, unless a completed job's last attempt is newer (its entry is implied,
-- not stored: COMPLETED_ENTRY in rota.drivers.base).
LEFT JOIN LATERAL (SELECT j.history -> -1 AS entry
                   WHERE j.state <> 'completed'
                      OR (j.history -> -1 ->> 'attempt')::int = j.attempt) AS last ON true
WHERE e.workflow_id = ANY(%(ids)s::bigint[])
  AND (NOT %(running_only)s OR s.state = 'running')
ORDER BY e.workflow_id, e.step, e.idx

-- name: workflow_job_cancel
-- Cancel a step's waiting job now, or ask a running one to stop (as job_cancel does).
-- moves: scheduled, available, retryable -> cancelled
-- moves: running -> running
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL ELSE now() END
WHERE id = %(id)s AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING id, pg_notify('rota_control', 'cancel:' || id)

-- name: workflow_job_retry
-- Run a failed step job again now, with `budget` more attempts.
-- moves: discarded, cancelled -> available
UPDATE rota_jobs
SET state = 'available',
    run_at = now(),
    finished_at = NULL,
    cancel_requested = false,
    max_attempts = attempt + %(budget)s
WHERE id = %(id)s AND state IN ('discarded', 'cancelled')
RETURNING id, pg_notify('rota_jobs', queue)

-- name: workflow_tick_of_job
-- The schedule run that enqueued a job, if any (a workflow started by cron keys on it).
SELECT s.name AS schedule, r.name AS run, r.kind AS kind, r.scheduled_local AS scheduled_local
FROM rota_schedule_runs r JOIN rota_schedules s ON s.id = r.schedule_id
WHERE r.job_id = %(job_id)s

-- name: workflow_prune_finished
-- Delete finished runs past their retention (their steps and job links go with them).
WITH old AS (
    SELECT id FROM rota_workflows
    WHERE (state IN ('completed', 'cancelled')
           AND finished_at < now() - make_interval(secs => %(completed_age)s))
       OR (state = 'failed' AND finished_at < now() - make_interval(secs => %(failed_age)s))
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM rota_workflows WHERE id = ANY (ARRAY(SELECT id FROM old))
