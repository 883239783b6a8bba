-- name: job_insert_many
-- Insert many jobs in one statement; ids are drawn first so results map back to input order.
WITH input AS (
    SELECT nextval(pg_get_serial_sequence('rota_jobs', 'id')) AS id, t.*
    FROM unnest(%(tasks)b::text[], %(queues)b::text[], %(args)b::jsonb[], %(priorities)b::smallint[],
                %(max_attempts)b::int[], %(keys)b::text[], %(ats)b::timestamptz[], %(delays)b::float8[],
                %(metas)b::jsonb[], %(partition_keys)b::text[], %(expires)b::timestamptz[],
                %(requires)b::text[], %(tenants)b::text[])
         WITH ORDINALITY AS t(task, queue, args, priority, max_attempts, key, at, delay, meta,
                              partition_key, expires_at, requires, tenant, ord)
),
timed AS (
    SELECT input.*, COALESCE(at, now() + make_interval(secs => COALESCE(delay, 0))) AS run_at
    FROM input
),
ins AS (
    INSERT INTO rota_jobs (id, task, queue, args, priority, max_attempts, key, run_at, meta,
                           partition_key, expires_at, requires, tenant, state)
    SELECT id, task, queue, args, priority, max_attempts, key, run_at, meta,
           partition_key, expires_at, string_to_array(requires, ','), tenant,
           CASE WHEN run_at > now() THEN 'scheduled' ELSE 'available' END
    FROM timed ORDER BY ord
    ON CONFLICT (task, key) WHERE key IS NOT NULL AND key_active DO NOTHING
    RETURNING *
)
SELECT timed.ord,
       CASE WHEN ins.state = 'available' THEN pg_notify('rota_jobs', ins.queue) END AS notified,
       ins.*
FROM timed JOIN ins ON ins.id = timed.id

-- name: job_get_by_keys
-- The jobs holding the active (task, key) pairs whose insert met a conflict.
SELECT j.* FROM rota_jobs j
JOIN unnest(%(tasks)b::text[], %(keys)b::text[]) AS k(task, key)
  ON j.task = k.task AND j.key = k.key AND j.key_active

-- name: job_release_keys
-- Release keys whose window has passed or whose job left the states the key guards.
UPDATE rota_jobs AS j SET key_active = false
FROM unnest(%(tasks)b::text[], %(keys)b::text[], %(ttls)b::float8[], %(states)b::text[])
     AS k(task, key, ttl, states)
WHERE j.task = k.task AND j.key = k.key AND j.key_active
  AND ((k.ttl IS NOT NULL AND j.created_at <= now() - make_interval(secs => k.ttl))
       OR (k.states IS NOT NULL AND NOT (j.state = ANY (string_to_array(k.states, ',')))))
RETURNING j.task, j.key

-- name: job_checkpoint
-- Store a running job's progress, fenced by its lease token.
UPDATE rota_jobs SET checkpoint = %(value)s::jsonb
WHERE id = %(id)s AND lease_token = %(token)s::uuid AND state = 'running'
RETURNING id

-- name: job_peek_available
-- Whether a queue has a job this worker could run (kept for parity; the claim is cheap here).
SELECT EXISTS (SELECT 1 FROM rota_jobs WHERE state = 'available' AND queue = %(queue)s
               AND (requires IS NULL OR requires <@ COALESCE(%(caps)s::text[], requires)))

-- name: job_fetch_available
-- Claim up to `limit` runnable jobs of an unlimited queue, each with a fresh lease token.
-- A paused, limited or fair queue yields nothing here (those go through the locked path);
-- a job past its expires_at is left for the expiry sweep; a job with a partition key runs
-- only when no earlier job of its key is waiting, running or dead (the partition gate);
-- a job with requirements only by a worker whose capabilities (`caps`) include them all
-- (NULL caps: no routing filter, as rota.testing.drain claims).
WITH picked AS (
    SELECT id FROM rota_jobs AS j
    WHERE state = 'available' AND queue = %(queue)s
      AND NOT EXISTS (SELECT 1 FROM rota_queues q WHERE q.name = %(queue)s
                      AND (q.paused OR q.global_limit IS NOT NULL OR q.rate_limit IS NOT NULL
                           OR q.fair))
      AND (j.expires_at IS NULL OR j.expires_at > now())
      AND (j.requires IS NULL OR j.requires <@ COALESCE(%(caps)s::text[], j.requires))
      AND (j.partition_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM rota_jobs AS b
          WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
            AND b.state IN ('scheduled', 'available', 'running', 'retryable', 'discarded')))
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE rota_jobs AS j
SET state = 'running',
    attempt = j.attempt + 1,
    attempted_at = now(),
    worker = %(worker)s,
    lease_token = gen_random_uuid(),
    lease_expires_at = now() + make_interval(secs => %(lease)s)
FROM picked
WHERE j.id = picked.id
RETURNING j.*

-- name: job_fetch_limited
-- Claim from a queue with a global concurrency or rate limit. Runs in a transaction after
-- queue_lock, so this statement's snapshot sees every claim committed before the lock:
-- the room left (limit - running, rate - starts in the window) holds across workers.
WITH cfg AS (
    SELECT global_limit, rate_limit, rate_period FROM rota_queues
    WHERE name = %(queue)s AND NOT paused
),
room AS (
    SELECT LEAST(
        %(limit)s::bigint,
        COALESCE(cfg.global_limit - (SELECT count(*) FROM rota_jobs
                                     WHERE state = 'running' AND queue = %(queue)s),
                 %(limit)s::bigint),
        COALESCE(cfg.rate_limit - (SELECT COALESCE(sum(s.n), 0) FROM rota_queue_starts AS s
                                   WHERE s.queue = %(queue)s
                                     AND s.started_at > statement_timestamp()
                                         - make_interval(secs => cfg.rate_period)),
                 %(limit)s::bigint)) AS n
    FROM cfg
),
picked AS (
    SELECT id FROM rota_jobs AS j
    WHERE state = 'available' AND queue = %(queue)s
      AND (j.expires_at IS NULL OR j.expires_at > statement_timestamp())
      AND (j.requires IS NULL OR j.requires <@ COALESCE(%(caps)s::text[], j.requires))
      AND (j.partition_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM rota_jobs AS b
          WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
            AND b.state IN ('scheduled', 'available', 'running', 'retryable', 'discarded')))
    ORDER BY priority, run_at, id
    LIMIT COALESCE((SELECT GREATEST(n, 0) FROM room), 0)
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    -- statement_timestamp(), not now(): the transaction began before the lock wait, and
    -- the start times must be the ones the rate window counts.
    UPDATE rota_jobs AS j
    SET state = 'running',
        attempt = j.attempt + 1,
        attempted_at = statement_timestamp(),
        worker = %(worker)s,
        lease_token = gen_random_uuid(),
        lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s)
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.*
),
logged AS (
    INSERT INTO rota_queue_starts (queue, started_at, n)
    SELECT %(queue)s, statement_timestamp(), count(*) FROM claimed
    HAVING count(*) > 0 AND EXISTS (SELECT 1 FROM cfg WHERE rate_limit IS NOT NULL)
),
forgotten AS (
    DELETE FROM rota_queue_starts AS s USING cfg
    WHERE s.queue = %(queue)s
      AND s.started_at < statement_timestamp() - make_interval(secs => COALESCE(cfg.rate_period, 0))
)
SELECT * FROM claimed

-- name: job_expire_due
-- Dead-letter waiting jobs whose start deadline passed (reason `expired`).
WITH due AS (
    SELECT id FROM rota_jobs
    WHERE expires_at <= now() AND state IN ('scheduled', 'available', 'retryable')
    ORDER BY expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE rota_jobs AS j
SET state = 'discarded',
    finished_at = now(),
    history = j.history || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempt, 'worker', NULL, 'started_at', NULL, 'finished_at', now(),
        'outcome', 'discarded', 'error_type', 'Expired', 'reason', 'expired',
        'message', 'expired: not started before ' || j.expires_at::text))
FROM due
WHERE j.id = due.id
RETURNING j.id

-- name: job_claim
-- Claim one given job if it is runnable: available, or waiting and due (rota.testing.inline
-- runs the job it enqueued; `rota run` claims its own job again after each backoff).
UPDATE rota_jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = now(),
    worker = %(worker)s,
    lease_token = gen_random_uuid(),
    lease_expires_at = now() + make_interval(secs => %(lease)s)
WHERE id = %(id)s
  AND (state = 'available' OR (state IN ('scheduled', 'retryable') AND run_at <= now()))
RETURNING *

-- name: job_complete_many
-- Write attempt outcomes, each fenced by its lease token; returns the ids accepted. A job
-- made available again (returned at shutdown, snoozed or retried with no delay) wakes
-- the workers, so one takes it at once.
UPDATE rota_jobs AS j
SET state = c.state,
    run_at = CASE WHEN c.delay IS NULL THEN j.run_at
                  ELSE now() + make_interval(secs => c.delay) END,
    finished_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled') THEN now() END,
    result = c.result,
    max_attempts = j.max_attempts + CASE WHEN c.refund THEN 1 ELSE 0 END,
    history = j.history || jsonb_build_array(c.entry || jsonb_build_object(
        'attempt', j.attempt, 'worker', j.worker,
        'started_at', j.attempted_at, 'finished_at', now())),
    lease_token = NULL,
    lease_expires_at = NULL
FROM unnest(%(ids)b::bigint[], %(tokens)b::uuid[], %(states)b::text[], %(delays)b::float8[],
            %(results)b::jsonb[], %(entries)b::jsonb[], %(refunds)b::bool[])
     AS c(id, token, state, delay, result, entry, refund)
WHERE j.id = c.id AND j.lease_token = c.token AND j.state = 'running'
RETURNING j.id, j.state, j.queue,
          CASE WHEN j.state = 'available' THEN pg_notify('rota_jobs', j.queue) END AS notified

-- name: job_lease_renew
-- Extend the leases a worker still holds; a missing row means the lease was lost.
UPDATE rota_jobs AS j
SET lease_expires_at = now() + make_interval(secs => %(lease)s)
FROM unnest(%(ids)b::bigint[], %(tokens)b::uuid[]) AS c(id, token)
WHERE j.id = c.id AND j.lease_token = c.token AND j.state = 'running'
RETURNING j.id, j.lease_token::text, j.cancel_requested

-- name: job_rescue_expired
-- Return jobs whose lease expired to the queue (or dead-letter them when out of attempts).
WITH expired AS (
    SELECT id FROM rota_jobs
    WHERE state = 'running' AND lease_expires_at < now()
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE rota_jobs AS j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN j.attempt >= j.max_attempts THEN 'discarded'
                 ELSE 'available' END,
    finished_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN now() END,
    history = j.history || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempt, 'worker', j.worker,
        'started_at', j.attempted_at, 'finished_at', now(),
        'outcome', 'lost', 'error_type', 'LeaseExpired',
        'message', 'lease expired: worker ' || COALESCE(j.worker, '?') || ' stopped renewing it',
        'condition', 'DisruptionTarget', 'reason', 'WorkerLost')),
    lease_token = NULL,
    lease_expires_at = NULL
FROM expired
WHERE j.id = expired.id
RETURNING j.id, j.state, CASE WHEN j.state = 'available' THEN pg_notify('rota_jobs', j.queue) END

-- name: job_stage_due
-- Make scheduled and retryable jobs due within `horizon` seconds (0: now) available; wake workers.
WITH due AS (
    SELECT id FROM rota_jobs
    WHERE state IN ('scheduled', 'retryable')
      AND run_at <= now() + make_interval(secs => %(horizon)s)
    ORDER BY run_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
moved AS (
    UPDATE rota_jobs AS j SET state = 'available', run_at = LEAST(j.run_at, now())
    FROM due WHERE j.id = due.id RETURNING j.queue
)
SELECT count(*) AS n, pg_notify('rota_jobs', queue) FROM moved GROUP BY queue

-- name: job_get
-- One job by id.
SELECT * FROM rota_jobs WHERE id = %(id)s

-- name: job_list
-- Jobs matching optional filters, newest first.
SELECT * FROM rota_jobs
WHERE (cardinality(%(states)s::text[]) = 0 OR state = ANY(%(states)s::text[]))
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s

-- name: job_cancel
-- Cancel a waiting job now, or ask a running one to stop.
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL ELSE now() END
WHERE id = %(id)s AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING *, pg_notify('rota_control', 'cancel:' || id)

-- name: job_retry
-- Put a finished or waiting job back in the queue now, with one more attempt if needed.
UPDATE rota_jobs
SET state = 'available',
    run_at = now(),
    finished_at = NULL,
    cancel_requested = false,
    max_attempts = GREATEST(max_attempts, attempt + 1)
WHERE id = %(id)s AND state IN ('scheduled', 'retryable', 'completed', 'discarded', 'cancelled')
RETURNING *, pg_notify('rota_jobs', queue)

-- name: job_prune_finished
-- Delete one small batch of finished jobs of one state past its retention. The IN list
-- matches rota_jobs_finished_idx's predicate, so the batch is read from that index; SKIP
-- LOCKED and the small batch keep the delete from holding up the claim.
WITH old AS (
    SELECT id FROM rota_jobs
    WHERE state IN ('completed', 'discarded', 'cancelled') AND state = %(state)s
      AND finished_at < now() - make_interval(secs => %(age)s)
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM rota_jobs j USING old WHERE j.id = old.id
