-- name: job_insert_many
-- Insert one job (called once per row inside one transaction: no round trips in SQLite).
INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, key, run_at, created_at, meta,
                       partition_key, expires_at, requires, tenant, state)
SELECT :task, :queue, :args, :priority, :max_attempts, :key, t.run_at, t.now, :meta,
       :partition_key, :expires_at, :requires, :tenant,
       CASE WHEN t.run_at > t.now THEN 'scheduled' ELSE 'available' END
FROM (SELECT COALESCE(:at, n.now + COALESCE(:delay, 0)) AS run_at, n.now
      FROM (SELECT (julianday('now') - 2440587.5) * 86400.0 AS now) AS n) AS t
WHERE true
ON CONFLICT (task, key) WHERE key IS NOT NULL AND key_active DO NOTHING
RETURNING *

-- name: job_get_by_keys
-- The job holding the active (task, key) pair whose insert met a conflict.
SELECT * FROM rota_jobs WHERE task = :task AND key = :key AND key_active

-- name: job_release_keys
-- Release a key whose window has passed or whose job left the states the key guards.
UPDATE rota_jobs SET key_active = 0
WHERE task = :task AND key = :key AND key_active
  AND ((:ttl IS NOT NULL AND created_at <= (julianday('now') - 2440587.5) * 86400.0 - :ttl)
       OR (:states IS NOT NULL AND instr(',' || :states || ',', ',' || state || ',') = 0))
RETURNING task, key

-- name: job_checkpoint
-- Store a running job's progress, fenced by its lease token.
UPDATE rota_jobs SET checkpoint = :value
WHERE id = :id AND lease_token = :token AND state = 'running'
RETURNING id

-- name: job_peek_available
-- Whether a queue has a job this worker could run: a WAL read that takes no lock, so idle polling
-- and wake-ups from other processes' commits do not contend for the write lock.
SELECT EXISTS (SELECT 1 FROM rota_jobs AS j WHERE state = 'available' AND queue = :queue
               AND (j.requires IS NULL OR :caps IS NULL OR NOT EXISTS (
                   SELECT 1 FROM json_each(j.requires) AS r
                   WHERE instr(:caps, ',' || r.value || ',') = 0)))

-- name: job_fetch_available
-- Claim up to `limit` runnable jobs of an unlimited queue, each with a fresh lease token.
-- A paused, limited or fair queue yields nothing here (those go through the locked path);
-- a job past its expires_at is left for the expiry sweep; a job with a partition key runs
-- only when no earlier job of its key is waiting, running or dead (the partition gate);
-- a job with requirements only by a worker whose capabilities include them all (`caps`
-- is ",gpu,mem:large,"; NULL: no routing filter, as rota.testing.drain claims).
UPDATE rota_jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = (julianday('now') - 2440587.5) * 86400.0,
    worker = :worker,
    lease_token = lower(hex(randomblob(16))),
    lease_expires_at = (julianday('now') - 2440587.5) * 86400.0 + :lease
WHERE id IN (
    SELECT id FROM rota_jobs AS j
    WHERE state = 'available' AND queue = :queue
      AND NOT EXISTS (SELECT 1 FROM rota_queues q WHERE q.name = :queue
                      AND (q.paused OR q.global_limit IS NOT NULL OR q.rate_limit IS NOT NULL
                           OR q.fair))
      AND (j.expires_at IS NULL OR j.expires_at > (julianday('now') - 2440587.5) * 86400.0)
      AND (j.requires IS NULL OR :caps IS NULL OR NOT EXISTS (
          SELECT 1 FROM json_each(j.requires) AS r WHERE instr(:caps, ',' || r.value || ',') = 0))
      AND (j.partition_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM rota_jobs AS b
          WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
            AND b.state IN ('scheduled', 'available', 'running', 'retryable', 'discarded')))
    ORDER BY priority, run_at, id
    LIMIT :limit
)
RETURNING *

-- name: job_fetch_limited
-- Claim from a queue with a global concurrency or rate limit. The write lock (BEGIN
-- IMMEDIATE) serialises claims, so the room left (limit - running, rate - starts in the
-- window) holds across processes; the driver logs the starts with queue_start_record.
UPDATE rota_jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = (julianday('now') - 2440587.5) * 86400.0,
    worker = :worker,
    lease_token = lower(hex(randomblob(16))),
    lease_expires_at = (julianday('now') - 2440587.5) * 86400.0 + :lease
WHERE id IN (
    SELECT id FROM rota_jobs AS j
    WHERE state = 'available' AND queue = :queue
      AND (j.expires_at IS NULL OR j.expires_at > (julianday('now') - 2440587.5) * 86400.0)
      AND (j.requires IS NULL OR :caps IS NULL OR NOT EXISTS (
          SELECT 1 FROM json_each(j.requires) AS r WHERE instr(:caps, ',' || r.value || ',') = 0))
      AND (j.partition_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM rota_jobs AS b
          WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
            AND b.state IN ('scheduled', 'available', 'running', 'retryable', 'discarded')))
    ORDER BY priority, run_at, id
    LIMIT COALESCE((
        SELECT MAX(0, MIN(
            :limit,
            COALESCE(q.global_limit - (SELECT count(*) FROM rota_jobs
                                       WHERE state = 'running' AND queue = :queue), :limit),
            COALESCE(q.rate_limit - (SELECT COALESCE(sum(s.n), 0) FROM rota_queue_starts AS s
                                     WHERE s.queue = :queue
                                       AND s.started_at > (julianday('now') - 2440587.5) * 86400.0
                                                          - q.rate_period), :limit)))
        FROM rota_queues AS q WHERE q.name = :queue AND NOT q.paused
    ), 0)
)
RETURNING *

-- name: job_expire_due
-- Dead-letter waiting jobs whose start deadline passed (reason `expired`).
UPDATE rota_jobs
SET state = 'discarded',
    finished_at = (julianday('now') - 2440587.5) * 86400.0,
    history = json_insert(history, '$[#]', json_object(
        'attempt', attempt, 'worker', NULL, 'started_at', NULL,
        'finished_at', (julianday('now') - 2440587.5) * 86400.0,
        'outcome', 'discarded', 'error_type', 'Expired', 'reason', 'expired',
        'message', 'expired: not started before '
                   || strftime('%Y-%m-%d %H:%M:%f+00:00', expires_at, 'unixepoch')))
WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE expires_at <= (julianday('now') - 2440587.5) * 86400.0
      AND state IN ('scheduled', 'available', 'retryable')
    ORDER BY expires_at
    LIMIT :limit
)
RETURNING id

-- name: job_claim
-- Claim one given job if it is runnable: available, or waiting and due (rota.testing.inline
-- runs the job it enqueued; `rota run` claims its own job again after each backoff).
UPDATE rota_jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = (julianday('now') - 2440587.5) * 86400.0,
    worker = :worker,
    lease_token = lower(hex(randomblob(16))),
    lease_expires_at = (julianday('now') - 2440587.5) * 86400.0 + :lease
WHERE id = :id
  AND (state = 'available'
       OR (state IN ('scheduled', 'retryable')
           AND run_at <= (julianday('now') - 2440587.5) * 86400.0))
RETURNING *

-- name: job_complete_many
-- Write attempt outcomes (a JSON array), each fenced by its lease token; returns ids accepted.
-- The unary + on state keeps SQLite from driving the join from the state index
-- (a nested loop over every running job); it must look rows up by id from the batch.
UPDATE rota_jobs
SET state = c.state,
    run_at = CASE WHEN c.delay IS NULL THEN rota_jobs.run_at
                  ELSE (julianday('now') - 2440587.5) * 86400.0 + c.delay END,
    finished_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled')
                       THEN (julianday('now') - 2440587.5) * 86400.0 END,
    result = c.result,
    max_attempts = rota_jobs.max_attempts + c.refund,
    history = json_insert(rota_jobs.history, '$[#]', json_patch(c.entry, json_object(
        'attempt', rota_jobs.attempt, 'worker', rota_jobs.worker,
        'started_at', rota_jobs.attempted_at,
        'finished_at', (julianday('now') - 2440587.5) * 86400.0))),
    lease_token = NULL,
    lease_expires_at = NULL
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token, json_extract(value, '$.state') AS state,
             json_extract(value, '$.delay') AS delay, json_extract(value, '$.result') AS result,
             json_extract(value, '$.entry') AS entry, json_extract(value, '$.refund') AS refund
      FROM json_each(:batch)) AS c
WHERE rota_jobs.id = c.id AND rota_jobs.lease_token = c.token AND +rota_jobs.state = 'running'
RETURNING rota_jobs.id, rota_jobs.state, rota_jobs.queue

-- name: job_lease_renew
-- Extend the leases a worker still holds; a missing row means the lease was lost.
UPDATE rota_jobs
SET lease_expires_at = (julianday('now') - 2440587.5) * 86400.0 + :lease
FROM (SELECT json_extract(value, '$[0]') AS id, json_extract(value, '$[1]') AS token FROM json_each(:leases)) AS c
WHERE rota_jobs.id = c.id AND rota_jobs.lease_token = c.token AND +rota_jobs.state = 'running'
RETURNING rota_jobs.id, rota_jobs.lease_token, rota_jobs.cancel_requested

-- name: job_rescue_expired
-- Return jobs whose lease expired to the queue (or dead-letter them when out of attempts).
UPDATE rota_jobs
SET state = CASE WHEN cancel_requested THEN 'cancelled'
                 WHEN attempt >= max_attempts THEN 'discarded'
                 ELSE 'available' END,
    finished_at = CASE WHEN cancel_requested OR attempt >= max_attempts
                       THEN (julianday('now') - 2440587.5) * 86400.0 END,
    history = json_insert(history, '$[#]', json_object(
        'attempt', attempt, 'worker', worker,
        'started_at', attempted_at, 'finished_at', (julianday('now') - 2440587.5) * 86400.0,
        'outcome', 'lost', 'error_type', 'LeaseExpired',
        'message', 'lease expired: worker ' || COALESCE(worker, '?') || ' stopped renewing it',
        'condition', 'DisruptionTarget', 'reason', 'WorkerLost')),
    lease_token = NULL,
    lease_expires_at = NULL
WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE state = 'running' AND lease_expires_at < (julianday('now') - 2440587.5) * 86400.0
    ORDER BY lease_expires_at
    LIMIT :limit
)
RETURNING id, state, NULL

-- name: job_stage_due
-- Make scheduled and retryable jobs due within `horizon` seconds available (0: due now).
UPDATE rota_jobs SET state = 'available',
    run_at = MIN(run_at, (julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE state IN ('scheduled', 'retryable')
      AND run_at <= (julianday('now') - 2440587.5) * 86400.0 + :horizon
    ORDER BY run_at
    LIMIT :limit
)
RETURNING queue

-- name: job_get
-- One job by id.
SELECT * FROM rota_jobs WHERE id = :id

-- name: job_list
-- Jobs matching optional filters, newest first.
SELECT * FROM rota_jobs
WHERE (:states IS NULL OR json_array_length(:states) = 0
       OR state IN (SELECT value FROM json_each(:states)))
  AND (:queue IS NULL OR queue = :queue)
  AND (:task IS NULL OR task = :task)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC
LIMIT :limit

-- name: job_cancel
-- Cancel a waiting job now, or ask a running one to stop.
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 END
WHERE id = :id AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING *

-- name: job_retry
-- Put a finished or waiting job back in the queue now, with one more attempt if needed.
UPDATE rota_jobs
SET state = 'available',
    run_at = (julianday('now') - 2440587.5) * 86400.0,
    finished_at = NULL,
    cancel_requested = 0,
    max_attempts = MAX(max_attempts, attempt + 1)
WHERE id = :id AND state IN ('scheduled', 'retryable', 'completed', 'discarded', 'cancelled')
RETURNING *

-- name: job_prune_finished
-- Delete one small batch of finished jobs of one state past its retention (the IN list
-- matches rota_jobs_finished_idx's predicate); a small batch keeps the write lock short.
DELETE FROM rota_jobs WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE state IN ('completed', 'discarded', 'cancelled') AND state = :state
      AND finished_at < (julianday('now') - 2440587.5) * 86400.0 - :age
    ORDER BY finished_at
    LIMIT :limit
)
