-- name: batch_insert
-- A new batch; a batch with the same name wins (no row returned).
INSERT INTO rota_batches (name, task, queue, priority, args, spec, parallelism, suspended,
                          on_finish, on_finish_queue, on_finish_priority, on_finish_max_attempts,
                          start_time)
VALUES (%(name)s, %(task)s, %(queue)s, %(priority)s, %(args)s::jsonb, %(spec)s::jsonb,
        %(parallelism)s, %(suspended)s, %(on_finish)s, %(on_finish_queue)s,
        %(on_finish_priority)s, %(on_finish_max_attempts)s,
        CASE WHEN %(suspended)s::boolean THEN NULL ELSE now() END)
ON CONFLICT (name) DO NOTHING
RETURNING id

-- name: batch_item_insert_many
-- One row per index; `args` are the item's arguments (NULL: the batch's).
INSERT INTO rota_batch_items (batch_id, idx, args)
SELECT %(batch_id)s, t.idx - 1, t.args
FROM unnest(%(args)s::jsonb[]) WITH ORDINALITY AS t(args, idx)

-- name: batch_get
-- One batch by id, with how many of its indexes have a live attempt.
SELECT b.*, b.spec::text AS spec_text, b.args::text AS args_text,
       (SELECT count(*) FROM rota_batch_items i
        WHERE i.batch_id = b.id AND i.state = 'active') AS active
FROM rota_batches b WHERE b.id = %(id)s

-- name: batch_get_by_name
-- One batch by name.
SELECT b.*, b.spec::text AS spec_text, b.args::text AS args_text,
       (SELECT count(*) FROM rota_batch_items i
        WHERE i.batch_id = b.id AND i.state = 'active') AS active
FROM rota_batches b WHERE b.name = %(name)s

-- name: batch_list
-- Batches, newest first, optionally only unfinished ones or one task's.
SELECT b.*, b.spec::text AS spec_text, b.args::text AS args_text,
       (SELECT count(*) FROM rota_batch_items i
        WHERE i.batch_id = b.id AND i.state = 'active') AS active
FROM rota_batches b
WHERE (NOT %(open_only)s::boolean OR b.condition IS NULL)
  AND (%(task)s::text IS NULL OR b.task = %(task)s::text)
ORDER BY b.id DESC
LIMIT %(limit)s

-- name: batch_open_ids
-- Batches without a final condition: the controller's work (a suspended batch with
-- nothing left to cancel has none).
SELECT b.id FROM rota_batches b
WHERE b.condition IS NULL
  AND NOT (b.suspended AND b.interim IS NULL
           AND NOT EXISTS (SELECT 1 FROM rota_batch_items i
                           WHERE i.batch_id = b.id AND i.state = 'active'))
ORDER BY b.id

-- name: batch_items
-- A batch's indexes; for active ones, their job's state and last attempt outcome.
SELECT i.idx, i.state, i.failures, i.last_failure_at, i.job_id, i.args::text AS args,
       j.state AS job_state, COALESCE(j.cancel_requested, false) AS cancel_requested,
       j.finished_at AS job_finished_at,
       last.entry ->> 'error_type' AS error_type,
       last.entry ->> 'message' AS error_message,
       last.entry ->> 'condition' AS condition,
       last.entry ->> 'reason' AS reason
FROM rota_batch_items i
LEFT JOIN rota_jobs j ON i.state = 'active' AND j.id = i.job_id
-- The last stored entry, unless a completed job's last attempt is newer (its entry is implied,
-- not stored: COMPLETED_ENTRY in rota.drivers.base).
LEFT JOIN LATERAL (SELECT j.history -> -1 AS entry
                   WHERE j.state <> 'completed'
                      OR (j.history -> -1 ->> 'attempt')::int = j.attempt) AS last ON true
WHERE i.batch_id = %(id)s
ORDER BY i.idx

-- name: batch_update_status
-- Write one controller pass's status, fenced by the version it read.
UPDATE rota_batches
SET succeeded = %(succeeded)s,
    failed = %(failed)s,
    ignored = %(ignored)s,
    fails_since_success = %(fails_since_success)s,
    last_failure_at = %(last_failure_at)s,
    interim = %(interim)s,
    interim_reason = %(interim_reason)s,
    interim_message = %(interim_message)s,
    condition = %(condition)s,
    reason = %(reason)s,
    message = %(message)s,
    finished_at = CASE WHEN %(finished)s::boolean THEN now() ELSE finished_at END,
    completion_time = CASE WHEN %(finished)s::boolean AND %(condition)s::text = 'Complete'
                           THEN now() ELSE completion_time END,
    version = version + 1
WHERE id = %(id)s AND version = %(version)s
RETURNING id

-- name: batch_item_update
-- One index's state after a pass.
UPDATE rota_batch_items
SET state = %(state)s, failures = %(failures)s, last_failure_at = %(last_failure_at)s,
    job_id = %(job_id)s
WHERE batch_id = %(batch_id)s AND idx = %(idx)s

-- name: batch_job_link
-- Record a job the batch started for an index (the index is marked active next).
INSERT INTO rota_batch_jobs (job_id, batch_id, idx) VALUES (%(job_id)s, %(batch_id)s, %(idx)s)

-- name: batch_item_start
-- Mark an index active with the job just started for it.
UPDATE rota_batch_items SET state = 'active', job_id = %(job_id)s
WHERE batch_id = %(batch_id)s AND idx = %(idx)s

-- name: batch_jobs_cancel
-- Cancel waiting jobs now; ask running ones to stop (the same as job_cancel, for many).
-- moves: scheduled, available, retryable -> cancelled
-- moves: running -> running
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL ELSE now() END
WHERE id = ANY(%(ids)s::bigint[]) AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING id, pg_notify('rota_control', 'cancel:' || id)

-- name: batch_callback_set
-- Remember the job of the batch's finish callback.
UPDATE rota_batches SET callback_job_id = %(job_id)s WHERE id = %(id)s

-- name: batch_set_suspended
-- Suspend or resume an unfinished batch; resuming restarts the deadline clock.
UPDATE rota_batches
SET start_time = CASE WHEN suspended AND NOT %(suspended)s::boolean THEN now()
                      ELSE start_time END,
    suspended = %(suspended)s,
    version = version + 1
WHERE id = %(id)s AND condition IS NULL AND interim IS NULL
RETURNING id

-- name: batch_set_parallelism
-- Change how many jobs an unfinished batch runs at once (the next pass applies it).
UPDATE rota_batches
SET parallelism = %(parallelism)s,
    spec = jsonb_set(spec, '{parallelism}', to_jsonb(%(parallelism)s::int)),
    version = version + 1
WHERE id = %(id)s AND condition IS NULL
RETURNING id

-- name: batch_request_cancel
-- Fail an unfinished batch on request: the controller cancels its jobs, then sets Failed.
UPDATE rota_batches
SET interim = 'FailureTarget', interim_reason = 'Cancelled', interim_message = %(message)s,
    version = version + 1
WHERE id = %(id)s AND condition IS NULL AND interim IS NULL
RETURNING id

-- name: batch_expired
-- Finished batches whose ttl_after_finished has passed.
SELECT id FROM rota_batches
WHERE condition IS NOT NULL
  AND spec ->> 'ttl_after_finished' IS NOT NULL
  AND finished_at + make_interval(secs => (spec ->> 'ttl_after_finished')::float8) <= now()
ORDER BY finished_at
LIMIT %(limit)s
FOR UPDATE SKIP LOCKED

-- name: batch_prune_jobs
-- Delete the finished jobs of the given batches.
DELETE FROM rota_jobs
WHERE id IN (SELECT job_id FROM rota_batch_jobs WHERE batch_id = ANY(%(ids)s::bigint[]))
  AND state IN ('completed', 'discarded', 'cancelled')

-- name: batch_delete
-- Delete batches (their items and job links go with them).
DELETE FROM rota_batches WHERE id = ANY(%(ids)s::bigint[])

-- name: batch_job_ids
-- The jobs a batch started, oldest first.
SELECT job_id FROM rota_batch_jobs WHERE batch_id = %(id)s ORDER BY job_id
