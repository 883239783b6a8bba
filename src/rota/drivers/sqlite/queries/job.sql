-- name: job_insert_many
-- Insert many jobs (a JSON array `j` of objects) in one statement, in input order, so the
-- rows returned map back to the input by id. A queue that receives a job with a per-job
-- gate (partition key, start deadline, required labels) is marked `gated` in the same
-- transaction, so no plain claim can pass the gate.
INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, key, run_at, created_at, meta,
                       partition_key, expires_at, requires, tenant, state)
SELECT r.task, r.queue, r.args, r.priority, r.max_attempts, r.key, r.run_at, r.now, r.meta,
       r.partition_key, r.expires_at,
       -- Comma-joined labels (they have no commas or quotes) as a JSON array.
       CASE WHEN r.requires IS NULL THEN NULL
            ELSE '["' || replace(r.requires, ',', '","') || '"]' END,
       r.tenant,
       CASE WHEN r.run_at > r.now THEN 'scheduled' ELSE 'available' END
FROM (SELECT e.key AS ord, n.now,
             json_extract(e.value, '$.task') AS task, json_extract(e.value, '$.queue') AS queue,
             json_extract(e.value, '$.args') AS args,
             json_extract(e.value, '$.priority') AS priority,
             json_extract(e.value, '$.max_attempts') AS max_attempts,
             json_extract(e.value, '$.key') AS key,
             COALESCE(json_extract(e.value, '$.at'),
                      n.now + COALESCE(json_extract(e.value, '$.delay'), 0)) AS run_at,
             json_extract(e.value, '$.meta') AS meta,
             json_extract(e.value, '$.partition_key') AS partition_key,
             json_extract(e.value, '$.expires_at') AS expires_at,
             json_extract(e.value, '$.requires') AS requires,
             json_extract(e.value, '$.tenant') AS tenant
      FROM json_each(:j) AS e, (SELECT (julianday('now') - 2440587.5) * 86400.0 AS now) AS n) AS r
WHERE true
ORDER BY r.ord
ON CONFLICT (task, key) WHERE key IS NOT NULL AND key_active DO NOTHING
-- What the database drew; the caller knows the rest.
RETURNING id, task, key, state, run_at, created_at;
INSERT INTO rota_queues (name, paused, gated, updated_at)
SELECT DISTINCT json_extract(e.value, '$.queue'), 0, 1, (julianday('now') - 2440587.5) * 86400.0
FROM json_each(:j) AS e
WHERE (json_extract(e.value, '$.partition_key') IS NOT NULL
       OR json_extract(e.value, '$.expires_at') IS NOT NULL
       OR json_extract(e.value, '$.requires') IS NOT NULL)
  AND NOT EXISTS (SELECT 1 FROM rota_queues AS q
                  WHERE q.name = json_extract(e.value, '$.queue') AND q.gated)
ON CONFLICT (name) DO UPDATE SET gated = 1, updated_at = excluded.updated_at

-- name: job_insert_many_plain
-- job_insert_many for jobs without a key, a gate or a tenant: the same statements (the
-- objects simply lack those fields, which read as NULL).
-- include: job_insert_many

-- name: job_insert_many_uniform
-- job_insert_many_plain for jobs that differ only in their arguments (one `enqueue_many`):
-- the shared columns once (`u_*`), the arguments as one JSON array of texts (`j_args`), and
-- one row back, as on PostgreSQL: the ids drawn and what all the jobs share. The ids of one
-- INSERT are contiguous here (AUTOINCREMENT under the one write lock): the last one drawn
-- and the count of rows the statement inserted name them all.
INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, run_at, created_at, meta, state)
SELECT :u_task, :u_queue, e.value, :u_priority, :u_max_attempts, t.run_at, t.now, :u_meta,
       CASE WHEN t.run_at > t.now THEN 'scheduled' ELSE 'available' END
FROM (SELECT n.now, COALESCE(:u_at, n.now + COALESCE(:u_delay, 0)) AS run_at
      FROM (SELECT (julianday('now') - 2440587.5) * 86400.0 AS now) AS n) AS t,
     json_each(:j_args) AS e
ORDER BY e.key;
SELECT json_group_array(id) AS ids, min(state) AS state, min(run_at) AS run_at,
       min(created_at) AS created_at
FROM rota_jobs
WHERE id > last_insert_rowid() - changes() AND id <= last_insert_rowid()

-- name: job_insert_one
-- job_insert_many for one job (a JSON array `j` of one object).
-- include: job_insert_many

-- name: job_insert_plain
-- job_insert_one for the common job: no idempotency key, no per-job gate, no tenant. One
-- statement with a parameter per column: no JSON to build and take apart, no queue upsert.
INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, run_at, created_at, meta, state)
SELECT :j_task, :j_queue, :j_args, :j_priority, :j_max_attempts, t.run_at, t.now, :j_meta,
       CASE WHEN t.run_at > t.now THEN 'scheduled' ELSE 'available' END
FROM (SELECT n.now, COALESCE(:j_at, n.now + COALESCE(:j_delay, 0)) AS run_at
      FROM (SELECT (julianday('now') - 2440587.5) * 86400.0 AS now) AS n) AS t
RETURNING id, state, run_at, created_at

-- name: job_get_by_keys
-- The jobs holding the active (task, key) pairs (a JSON array `k`) whose insert met a conflict.
SELECT j.* FROM rota_jobs AS j
JOIN (SELECT json_extract(value, '$.task') AS task, json_extract(value, '$.key') AS key
      FROM json_each(:k)) AS k
  ON j.task = k.task AND j.key = k.key AND j.key_active

-- name: job_release_keys
-- Release keys whose window has passed or whose job left the states the key guards.
UPDATE rota_jobs SET key_active = 0
FROM (SELECT json_extract(value, '$.task') AS task, json_extract(value, '$.key') AS key,
             json_extract(value, '$.ttl') AS ttl, json_extract(value, '$.states') AS states
      FROM json_each(:k)) AS k
WHERE rota_jobs.task = k.task AND rota_jobs.key = k.key AND rota_jobs.key_active
  AND ((k.ttl IS NOT NULL AND rota_jobs.created_at <= (julianday('now') - 2440587.5) * 86400.0 - k.ttl)
       OR (k.states IS NOT NULL
           AND instr(',' || k.states || ',', ',' || rota_jobs.state || ',') = 0))
RETURNING rota_jobs.task, rota_jobs.key

-- name: job_claim_plain
-- One write transaction of a worker on a plain queue: write the attempts that ended, then
-- claim up to `limit` jobs, each with a fresh lease token (nothing when the queue is paused
-- or no longer plain), and say how the queue is claimed now. Rows: kind 'done', 'job',
-- 'queue' (see the PostgreSQL statement).
-- moves: available -> running
-- moves: running -> completed, retryable, available, scheduled, discarded, cancelled
-- include: job_complete_many
UPDATE rota_jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = (julianday('now') - 2440587.5) * 86400.0,
    worker = :worker,
    lease_token = lower(hex(randomblob(16))),
    lease_expires_at = (julianday('now') - 2440587.5) * 86400.0 + :lease
WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE state = 'available' AND queue = :queue
      AND NOT EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = :queue
                      AND (q.paused OR q.gated OR q.fair OR q.global_limit IS NOT NULL
                           OR q.rate_limit IS NOT NULL))
    ORDER BY priority, run_at, id
    LIMIT :limit
)
RETURNING 'job' AS kind, id, task, queue, args, priority, attempt, max_attempts, run_at,
          created_at, key, lease_token, lease_expires_at, meta, checkpoint, partition_key,
          expires_at, requires, tenant, attempted_at, worker;
-- include: queue_claim_status

-- name: job_claim_gated
-- Like job_claim_plain, for a queue whose jobs may carry per-job gates: a job past its
-- expires_at is left for the expiry sweep; a job with a partition key runs only when no
-- earlier job of its key is waiting, running or dead; a job with required labels only by a
-- worker whose capabilities (`caps`, a JSON array) include them all (NULL: no filter).
-- moves: available -> running
-- moves: running -> completed, retryable, available, scheduled, discarded, cancelled
-- include: job_complete_many
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
      AND EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = :queue
                  AND q.gated AND NOT (q.paused OR q.fair OR q.global_limit IS NOT NULL
                                        OR q.rate_limit IS NOT NULL))
      AND (j.expires_at IS NULL OR j.expires_at > (julianday('now') - 2440587.5) * 86400.0)
      AND (j.requires IS NULL OR :caps IS NULL OR NOT EXISTS (
          SELECT 1 FROM json_each(j.requires) AS r
          WHERE r.value NOT IN (SELECT value FROM json_each(:caps))))
      AND (j.partition_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM rota_jobs AS b
          WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
            AND (b.state = 'scheduled' OR b.state = 'available' OR b.state = 'running' OR b.state = 'retryable' OR b.state = 'discarded')))
    ORDER BY priority, run_at, id
    LIMIT :limit
)
RETURNING 'job' AS kind, id, task, queue, args, priority, attempt, max_attempts, run_at,
          created_at, key, lease_token, lease_expires_at, meta, checkpoint, partition_key,
          expires_at, requires, tenant, attempted_at, worker;
-- include: queue_claim_status

-- name: job_claim_limited
-- Claim from a queue with a global concurrency or rate limit. The write lock (BEGIN
-- IMMEDIATE) serialises claims, so the room left (limit - running, rate - starts in the
-- window) holds across processes; the starts are logged for the rate window (changes():
-- the rows the claim just took) and the window's old starts forgotten.
-- moves: available -> running
-- include: job_complete_many
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
          SELECT 1 FROM json_each(j.requires) AS r
          WHERE r.value NOT IN (SELECT value FROM json_each(:caps))))
      AND (j.partition_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM rota_jobs AS b
          WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
            AND (b.state = 'scheduled' OR b.state = 'available' OR b.state = 'running' OR b.state = 'retryable' OR b.state = 'discarded')))
    ORDER BY priority, run_at, id
    LIMIT COALESCE((
        SELECT MAX(0, MIN(
            :limit,
            COALESCE(q.global_limit - (SELECT count(*) FROM rota_jobs
                                       WHERE state = 'running' AND queue = :queue), :limit),
            COALESCE(q.rate_limit - (SELECT COALESCE(sum(s.n), 0) FROM rota_queue_starts AS s
                                     WHERE s.queue = :queue
                                       AND s.started_at > (julianday('now') - 2440587.5) * 86400.0 - q.rate_period), :limit)))
        FROM rota_queues AS q
        WHERE q.name = :queue AND NOT q.paused AND NOT q.fair
          AND (q.global_limit IS NOT NULL OR q.rate_limit IS NOT NULL)
    ), 0)
)
RETURNING 'job' AS kind, id, task, queue, args, priority, attempt, max_attempts, run_at,
          created_at, key, lease_token, lease_expires_at, meta, checkpoint, partition_key,
          expires_at, requires, tenant, attempted_at, worker;
INSERT INTO rota_queue_starts (queue, started_at, n)
SELECT :queue, (julianday('now') - 2440587.5) * 86400.0, changes()
WHERE changes() > 0
  AND EXISTS (SELECT 1 FROM rota_queues WHERE name = :queue AND rate_limit IS NOT NULL);
DELETE FROM rota_queue_starts
WHERE queue = :queue
  AND started_at < (julianday('now') - 2440587.5) * 86400.0 - COALESCE((SELECT rate_period FROM rota_queues WHERE name = :queue), 0);
-- include: queue_claim_status

-- name: job_complete_many
-- Write attempt outcomes, each fenced by its lease token (set exactly while the job runs,
-- so no state predicate: the rows are found by primary key). `p`: the attempts that
-- completed with nothing else to write, a JSON object of lease tokens by job id (read as
-- json_each's key and value: nothing to parse per row); `c`: the rest, a JSON array of
-- objects (SQLiteCodec.completions). The plain completions of jobs that hold no result
-- are counted here, per queue and worker for the whole batch, before they move (the
-- write lock is held, so the same rows match), and their update writes no `result`, so no
-- trigger counts them; the triggers count the rest (migration 0020).
-- moves: running -> completed, retryable, available, scheduled, discarded, cancelled
INSERT INTO rota_job_counts (queue, state, worker, n, entered, last_at)
SELECT j.queue, 'completed', COALESCE(j.worker, ''), count(*), count(*),
       (julianday('now') - 2440587.5) * 86400.0
FROM json_each(:p) AS p CROSS JOIN rota_jobs AS j
WHERE j.id = p.key AND j.lease_token = p.value AND j.result IS NULL
GROUP BY j.queue, j.worker
ON CONFLICT (queue, state, worker) DO UPDATE SET
    n = n + excluded.n, entered = entered + excluded.entered,
    last_at = max(last_at, excluded.last_at);
UPDATE rota_jobs
SET state = 'completed',
    finished_at = (julianday('now') - 2440587.5) * 86400.0,
    lease_token = NULL,
    lease_expires_at = NULL
FROM json_each(:p) AS p
WHERE rota_jobs.id = p.key AND rota_jobs.lease_token = p.value AND rota_jobs.result IS NULL
RETURNING 'done' AS kind, rota_jobs.id;
-- A plain completion of a job that still holds an earlier run's result (a completed job
-- retried): the result goes, and writing it has rota_jobs_completed_row count the job.
UPDATE rota_jobs
SET state = 'completed',
    finished_at = (julianday('now') - 2440587.5) * 86400.0,
    result = NULL,
    lease_token = NULL,
    lease_expires_at = NULL
FROM json_each(:p) AS p
WHERE rota_jobs.id = p.key AND rota_jobs.lease_token = p.value
RETURNING 'done' AS kind, rota_jobs.id;
-- Writes `result`: each job it completes is counted by rota_jobs_completed_row (0020).
UPDATE rota_jobs
SET state = c.state,
    run_at = CASE WHEN c.delay IS NULL THEN rota_jobs.run_at ELSE (julianday('now') - 2440587.5) * 86400.0 + c.delay END,
    finished_at = CASE WHEN (c.state = 'completed' OR c.state = 'discarded' OR c.state = 'cancelled') THEN (julianday('now') - 2440587.5) * 86400.0 END,
    result = c.result,
    max_attempts = rota_jobs.max_attempts + c.refund,
    -- A NULL entry is implied, not written (COMPLETED_ENTRY in rota.drivers.base).
    history = CASE WHEN c.entry IS NULL THEN rota_jobs.history
                   ELSE json_insert(rota_jobs.history, '$[#]', json_patch(c.entry, json_object(
                       'attempt', rota_jobs.attempt, 'worker', rota_jobs.worker,
                       'started_at', rota_jobs.attempted_at,
                       'finished_at', (julianday('now') - 2440587.5) * 86400.0))) END,
    lease_token = NULL,
    lease_expires_at = NULL
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token,
             json_extract(value, '$.state') AS state, json_extract(value, '$.delay') AS delay,
             json_extract(value, '$.result') AS result, json_extract(value, '$.entry') AS entry,
             json_extract(value, '$.refund') AS refund
      FROM json_each(:c)) AS c
WHERE rota_jobs.id = c.id AND rota_jobs.lease_token = c.token
RETURNING 'done' AS kind, rota_jobs.id, rota_jobs.state, rota_jobs.queue

-- name: job_lease_renew
-- Extend the leases a worker still holds (found by primary key); a missing row means the
-- lease was lost.
UPDATE rota_jobs
SET lease_expires_at = (julianday('now') - 2440587.5) * 86400.0 + :lease
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token
      FROM json_each(:c)) AS c
WHERE rota_jobs.id = c.id AND rota_jobs.lease_token = c.token
RETURNING rota_jobs.id, rota_jobs.lease_token, rota_jobs.cancel_requested

-- name: queue_claim_status
-- How a queue is claimed now (its mode: fair, limited, gated or plain), whether it is
-- paused, and whether jobs are waiting in it (after this transaction's claim).
SELECT 'queue' AS kind,
       CASE WHEN fair THEN 'fair'
            WHEN global_limit IS NOT NULL OR rate_limit IS NOT NULL THEN 'limited'
            WHEN gated THEN 'gated' ELSE 'plain' END AS mode,
       paused,
       EXISTS (SELECT 1 FROM rota_jobs WHERE state = 'available' AND queue = :queue) AS waiting
FROM rota_queues WHERE name = :queue

-- name: job_checkpoint
-- Store a running job's progress, fenced by its lease token.
UPDATE rota_jobs SET checkpoint = :value
WHERE id = :id AND lease_token = :token
RETURNING id

-- name: job_claim
-- Claim one given job if it is runnable: available, or waiting and due (rota.testing.inline
-- runs the job it enqueued; `rota run` claims its own job again after each backoff).
-- moves: available, scheduled, retryable -> running
UPDATE rota_jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = (julianday('now') - 2440587.5) * 86400.0,
    worker = :worker,
    lease_token = lower(hex(randomblob(16))),
    lease_expires_at = (julianday('now') - 2440587.5) * 86400.0 + :lease
WHERE id = :id
  AND (state = 'available'
       OR ((state = 'scheduled' OR state = 'retryable')
           AND run_at <= (julianday('now') - 2440587.5) * 86400.0))
RETURNING *

-- name: job_rescue_expired
-- Return jobs whose lease expired to the queue (or dead-letter them when out of attempts).
-- moves: running -> available, discarded, cancelled
-- job_rescue_orphaned (presence.sql) repeats this SET list: change the two together.
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
    -- No ORDER BY id: SQLite writes one transaction at a time, so there is no lock order
    -- to keep, and with ORDER BY SQLite walks every row by id instead of the running jobs' index.
    LIMIT :limit
)
RETURNING id, state, NULL

-- name: job_stage_due
-- Make scheduled and retryable jobs due within `horizon` seconds available (0: due now).
-- moves: scheduled, retryable -> available
UPDATE rota_jobs SET state = 'available',
    run_at = MIN(run_at, (julianday('now') - 2440587.5) * 86400.0)
WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE (state = 'scheduled' OR state = 'retryable')
      AND run_at <= (julianday('now') - 2440587.5) * 86400.0 + :horizon
    ORDER BY run_at
    LIMIT :limit
)
RETURNING queue, 1 AS n

-- name: job_next_due
-- Seconds until the earliest scheduled or retryable job is due (negative: overdue; NULL:
-- none waits). The stager rests until then where it hears of every commit.
SELECT min(run_at) - (julianday('now') - 2440587.5) * 86400.0 AS due_in
FROM rota_jobs WHERE (state = 'scheduled' OR state = 'retryable')

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
-- moves: scheduled, available, retryable -> cancelled
-- moves: running -> running
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 END
WHERE id = :id AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING *

-- name: job_retry
-- Put a finished or waiting job back in the queue now, with one more attempt if needed.
-- moves: scheduled, retryable, completed, discarded, cancelled -> available
UPDATE rota_jobs
SET state = 'available',
    run_at = (julianday('now') - 2440587.5) * 86400.0,
    finished_at = NULL,
    cancel_requested = 0,
    max_attempts = MAX(max_attempts, attempt + 1),
    -- A completed attempt's implied entry is stored before the job runs again.
    history = CASE WHEN state = 'completed'
                        AND json_extract(history, '$[#-1].attempt') IS NOT attempt
                   THEN json_insert(history, '$[#]', json_object(
                       'attempt', attempt, 'worker', worker, 'started_at', attempted_at,
                       'finished_at', finished_at, 'outcome', 'completed'))
                   ELSE history END
WHERE id = :id AND state IN ('scheduled', 'retryable', 'completed', 'discarded', 'cancelled')
RETURNING *

-- name: job_prune_finished
-- Delete one batch of finished jobs of one state past its retention, oldest first, read
-- from rota_jobs_finished_state_idx (state, finished_at); a batch keeps the write lock short.
DELETE FROM rota_jobs WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE (state = 'completed' OR state = 'discarded' OR state = 'cancelled') AND state = :state
      AND finished_at < (julianday('now') - 2440587.5) * 86400.0 - :age
    ORDER BY finished_at
    LIMIT :limit
)

-- name: job_next_expiry
-- Seconds until the earliest waiting job's start deadline passes (negative: passed; NULL:
-- no waiting job has one). The expirer rests until then where it hears of every commit.
SELECT min(expires_at) - (julianday('now') - 2440587.5) * 86400.0 AS due_in
FROM rota_jobs
WHERE expires_at IS NOT NULL AND (state = 'scheduled' OR state = 'available' OR state = 'retryable')

-- name: job_expire_due
-- Dead-letter waiting jobs whose start deadline passed (reason `expired`).
-- moves: scheduled, available, retryable -> discarded
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
      AND (state = 'scheduled' OR state = 'available' OR state = 'retryable')
    ORDER BY expires_at
    LIMIT :limit
)
RETURNING id

