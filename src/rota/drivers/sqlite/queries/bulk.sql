-- name: job_bulk_count
-- What a bulk cancel (or a queue purge) would take, per task: the oldest `limit` matching jobs.
SELECT task, count(*) AS n FROM (
    SELECT task FROM rota_jobs
    WHERE state IN (SELECT value FROM json_each(:states))
      AND (:queue IS NULL OR queue = :queue)
      AND (:task IS NULL OR task = :task)
      AND (:tenant IS NULL OR tenant = :tenant)
      AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
    ORDER BY id
    LIMIT :limit
) AS chosen
GROUP BY task ORDER BY task

-- name: job_bulk_matched
-- How many jobs match a bulk cancel's selection, without its limit.
SELECT count(*) AS n FROM rota_jobs
WHERE state IN (SELECT value FROM json_each(:states))
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))

-- name: job_bulk_cancel
-- Cancel the oldest `limit` jobs of a selection (ask the running ones to stop).
-- moves: scheduled, available, retryable -> cancelled
-- moves: running -> running
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 END
WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE state IN (SELECT value FROM json_each(:states))
      AND (:queue IS NULL OR queue = :queue)
      AND (:task IS NULL OR task = :task)
      AND (:tenant IS NULL OR tenant = :tenant)
      AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
    ORDER BY id
    LIMIT :limit
)
  AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING id, task, NULL AS notified

-- name: audit_insert
-- Record one operator action (a queue purge, a bulk cancel): who, why, the selection, what it did.
INSERT INTO rota_audit (created_at, principal, action, reason, selection, count, job_ids)
VALUES ((julianday('now') - 2440587.5) * 86400.0, :principal, :action, :reason, :selection,
        :count, :job_ids)
RETURNING *

-- name: audit_list
-- Operator actions, newest first (optionally of one kind).
SELECT * FROM rota_audit
WHERE (:action IS NULL OR action = :action)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC LIMIT :limit
