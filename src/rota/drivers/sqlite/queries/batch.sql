-- name: batch_insert
-- A new batch; a batch with the same name wins (no row returned).
INSERT INTO rota_batches (name, task, queue, priority, args, spec, parallelism, suspended,
                          on_finish, on_finish_queue, on_finish_priority, on_finish_max_attempts,
                          created_at, start_time)
VALUES (:name, :task, :queue, :priority, :args, :spec, :parallelism, :suspended,
        :on_finish, :on_finish_queue, :on_finish_priority, :on_finish_max_attempts,
        (julianday('now') - 2440587.5) * 86400.0,
        CASE WHEN :suspended THEN NULL ELSE (julianday('now') - 2440587.5) * 86400.0 END)
ON CONFLICT (name) DO NOTHING
RETURNING id

-- name: batch_item_insert_many
-- One row per index; `args` are the item's arguments (NULL: the batch's).
INSERT INTO rota_batch_items (batch_id, idx, args)
SELECT :batch_id, CAST(key AS INTEGER), CASE WHEN type = 'null' THEN NULL ELSE json(value) END
FROM json_each(:args)

-- name: batch_get
-- One batch by id, with how many of its indexes have a live attempt.
SELECT b.*, b.spec AS spec_text, b.args AS args_text,
       (SELECT count(*) FROM rota_batch_items i
        WHERE i.batch_id = b.id AND i.state = 'active') AS active
FROM rota_batches b WHERE b.id = :id

-- name: batch_get_by_name
-- One batch by name.
SELECT b.*, b.spec AS spec_text, b.args AS args_text,
       (SELECT count(*) FROM rota_batch_items i
        WHERE i.batch_id = b.id AND i.state = 'active') AS active
FROM rota_batches b WHERE b.name = :name

-- name: batch_list
-- Batches, newest first, optionally only unfinished ones or one task's.
SELECT b.*, b.spec AS spec_text, b.args AS args_text,
       (SELECT count(*) FROM rota_batch_items i
        WHERE i.batch_id = b.id AND i.state = 'active') AS active
FROM rota_batches b
WHERE (NOT :open_only OR b.condition IS NULL)
  AND (:task IS NULL OR b.task = :task)
ORDER BY b.id DESC
LIMIT :limit

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
SELECT i.idx, i.state, i.failures, i.last_failure_at, i.job_id, i.args,
       j.state AS job_state, COALESCE(j.cancel_requested, 0) AS cancel_requested,
       j.finished_at AS job_finished_at,
       json_extract(last.value, '$.error_type') AS error_type,
       json_extract(last.value, '$.message') AS error_message,
       json_extract(last.value, '$.condition') AS condition,
       json_extract(last.value, '$.reason') AS reason
FROM rota_batch_items i
LEFT JOIN rota_jobs j ON i.state = 'active' AND j.id = i.job_id
-- The last stored entry, unless a completed job's last attempt is newer (its entry is implied,
-- not stored: COMPLETED_ENTRY in rota.drivers.base).
LEFT JOIN json_each(j.history) AS last
  ON last.key = json_array_length(j.history) - 1
 AND (j.state <> 'completed' OR json_extract(last.value, '$.attempt') = j.attempt)
WHERE i.batch_id = :id
ORDER BY i.idx

-- name: batch_update_status
-- Write one controller pass's status, fenced by the version it read.
UPDATE rota_batches
SET succeeded = :succeeded,
    failed = :failed,
    ignored = :ignored,
    fails_since_success = :fails_since_success,
    last_failure_at = :last_failure_at,
    interim = :interim,
    interim_reason = :interim_reason,
    interim_message = :interim_message,
    condition = :condition,
    reason = :reason,
    message = :message,
    finished_at = CASE WHEN :finished THEN (julianday('now') - 2440587.5) * 86400.0
                       ELSE finished_at END,
    completion_time = CASE WHEN :finished AND :condition = 'Complete'
                           THEN (julianday('now') - 2440587.5) * 86400.0
                           ELSE completion_time END,
    version = version + 1
WHERE id = :id AND version = :version
RETURNING id

-- name: batch_item_update
-- One index's state after a pass.
UPDATE rota_batch_items
SET state = :state, failures = :failures, last_failure_at = :last_failure_at, job_id = :job_id
WHERE batch_id = :batch_id AND idx = :idx

-- name: batch_job_link
-- Record a job the batch started for an index (the index is marked active next).
INSERT INTO rota_batch_jobs (job_id, batch_id, idx) VALUES (:job_id, :batch_id, :idx)

-- name: batch_item_start
-- Mark an index active with the job just started for it.
UPDATE rota_batch_items SET state = 'active', job_id = :job_id
WHERE batch_id = :batch_id AND idx = :idx

-- name: batch_jobs_cancel
-- Cancel waiting jobs now; ask running ones to stop (the same as job_cancel, for many).
-- moves: scheduled, available, retryable -> cancelled
-- moves: running -> running
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 END
WHERE id IN (SELECT value FROM json_each(:ids))
  AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING id

-- name: batch_callback_set
-- Remember the job of the batch's finish callback.
UPDATE rota_batches SET callback_job_id = :job_id WHERE id = :id

-- name: batch_set_suspended
-- Suspend or resume an unfinished batch; resuming restarts the deadline clock.
UPDATE rota_batches
SET start_time = CASE WHEN suspended AND NOT :suspended
                      THEN (julianday('now') - 2440587.5) * 86400.0 ELSE start_time END,
    suspended = :suspended,
    version = version + 1
WHERE id = :id AND condition IS NULL AND interim IS NULL
RETURNING id

-- name: batch_set_parallelism
-- Change how many jobs an unfinished batch runs at once (the next pass applies it).
UPDATE rota_batches
SET parallelism = :parallelism,
    spec = json_set(spec, '$.parallelism', :parallelism),
    version = version + 1
WHERE id = :id AND condition IS NULL
RETURNING id

-- name: batch_request_cancel
-- Fail an unfinished batch on request: the controller cancels its jobs, then sets Failed.
UPDATE rota_batches
SET interim = 'FailureTarget', interim_reason = 'Cancelled', interim_message = :message,
    version = version + 1
WHERE id = :id AND condition IS NULL AND interim IS NULL
RETURNING id

-- name: batch_expired
-- Finished batches whose ttl_after_finished has passed.
SELECT id FROM rota_batches
WHERE condition IS NOT NULL
  AND json_extract(spec, '$.ttl_after_finished') IS NOT NULL
  AND finished_at + json_extract(spec, '$.ttl_after_finished')
      <= (julianday('now') - 2440587.5) * 86400.0
ORDER BY finished_at
LIMIT :limit

-- name: batch_prune_jobs
-- Delete the finished jobs of the given batches.
DELETE FROM rota_jobs
WHERE id IN (SELECT job_id FROM rota_batch_jobs
             WHERE batch_id IN (SELECT value FROM json_each(:ids)))
  AND (state = 'completed' OR state = 'discarded' OR state = 'cancelled')

-- name: batch_delete
-- Delete batches (their items and job links go with them).
DELETE FROM rota_batches WHERE id IN (SELECT value FROM json_each(:ids))

-- name: batch_job_ids
-- The jobs a batch started, oldest first.
SELECT job_id FROM rota_batch_jobs WHERE batch_id = :id ORDER BY job_id
