-- name: job_bulk_count
-- What a bulk cancel (or a queue purge) would take, per task: the oldest `limit` matching jobs.
SELECT task, count(*) AS n FROM (
    SELECT task FROM rota_jobs
    WHERE state = ANY(%(states)s::text[])
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
      AND (%(task)s::text IS NULL OR task = %(task)s::text)
      AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
      AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
    ORDER BY id
    LIMIT %(limit)s
) AS chosen
GROUP BY task ORDER BY task

-- name: job_bulk_matched
-- How many jobs match a bulk cancel's selection, without its limit.
SELECT count(*) AS n FROM rota_jobs
WHERE state = ANY(%(states)s::text[])
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))

-- name: job_bulk_cancel
-- Cancel the oldest `limit` jobs of a selection (ask the running ones to stop), locked in
-- id order; jobs another transaction holds are left for the next call.
-- moves: scheduled, available, retryable -> cancelled
-- moves: running -> running
WITH chosen AS (
    SELECT id FROM rota_jobs
    WHERE state = ANY(%(states)s::text[])
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
      AND (%(task)s::text IS NULL OR task = %(task)s::text)
      AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
      AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE rota_jobs AS j
SET state = CASE WHEN j.state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (j.state = 'running'),
    finished_at = CASE WHEN j.state = 'running' THEN NULL ELSE now() END
WHERE j.id = ANY (ARRAY(SELECT id FROM chosen))
  AND j.state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING j.id, j.task,
          CASE WHEN j.state = 'running' THEN pg_notify('rota_control', 'cancel:' || j.id) END
              AS notified

-- name: audit_insert
-- Record one operator action (a queue purge, a bulk cancel): who, why, the selection, what it did.
INSERT INTO rota_audit (principal, action, reason, selection, count, job_ids)
VALUES (%(principal)s, %(action)s, %(reason)s, %(selection)s::jsonb, %(count)s,
        %(job_ids)s::jsonb)
RETURNING *

-- name: audit_list
-- Operator actions, newest first (optionally of one kind).
SELECT * FROM rota_audit
WHERE (%(action)s::text IS NULL OR action = %(action)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC LIMIT %(limit)s
