-- name: job_insert_many
-- Insert many jobs in one statement (one array per column, `j_*`); the column's default
-- draws the ids as the rows arrive in input order (`ORDER BY ord`), so the rows returned map
-- back to the input by id. (Not `nextval(pg_get_serial_sequence(...))` per row: that looks
-- the sequence up in the catalog once per row, a quarter of a 1,000-job insert's time.) A
-- queue that receives a job with a per-job gate (partition key, start deadline, required
-- labels) is marked `gated`, in the same transaction, so no plain claim can pass the gate;
-- each queue with a new available job is notified once.
WITH input AS (
    SELECT t.*
    FROM (SELECT * FROM unnest(%(j_task)b::text[], %(j_queue)b::text[], %(j_args)b::jsonb[],
                               %(j_priority)b::smallint[], %(j_max_attempts)b::int[],
                               %(j_key)b::text[], %(j_at)b::timestamptz[], %(j_delay)b::float8[],
                               %(j_meta)b::jsonb[], %(j_partition_key)b::text[],
                               %(j_expires_at)b::timestamptz[], %(j_requires)b::text[],
                               %(j_tenant)b::text[])
               WITH ORDINALITY AS t(task, queue, args, priority, max_attempts, key, at, delay,
                                    meta, partition_key, expires_at, requires, tenant, ord)
          ORDER BY ord) AS t
),
timed AS (
    SELECT input.*, COALESCE(at, now() + make_interval(secs => COALESCE(delay, 0))) AS run_at
    FROM input
),
ins AS (
    INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, key, run_at, meta,
                           partition_key, expires_at, requires, tenant, state)
    SELECT task, queue, args, priority, max_attempts, key, run_at, meta,
           partition_key, expires_at, string_to_array(requires, ','), tenant,
           CASE WHEN run_at > now() THEN 'scheduled' ELSE 'available' END
    FROM timed ORDER BY ord
    ON CONFLICT (task, key) WHERE key IS NOT NULL AND key_active DO NOTHING
    -- What the database drew; the caller knows the rest.
    RETURNING id, task, key, state, run_at, created_at, queue
),
gate AS (
    INSERT INTO rota_queues (name, paused, gated, updated_at)
    SELECT DISTINCT queue, false, true, now() FROM timed AS t
    WHERE (t.partition_key IS NOT NULL OR t.expires_at IS NOT NULL OR t.requires IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = t.queue AND q.gated)
    ON CONFLICT (name) DO UPDATE SET gated = true, updated_at = now()
),
notified AS (
    SELECT count(pg_notify('rota_jobs', queue)) AS n
    FROM (SELECT DISTINCT queue FROM ins WHERE state = 'available') AS q
)
SELECT ins.*, (SELECT n FROM notified) AS notified FROM ins

-- name: job_insert_many_plain
-- job_insert_many for plain jobs (no idempotency key, no per-job gate, no tenant): eight
-- arrays instead of thirteen, no conflict arbiter, no queue upsert. Ids are drawn in input
-- order, as job_insert_many draws them.
WITH ins AS (
    INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, run_at, meta, state)
    SELECT task, queue, args, priority, max_attempts, run_at, meta,
           CASE WHEN run_at > now() THEN 'scheduled' ELSE 'available' END
    FROM (SELECT t.*, COALESCE(at, now() + make_interval(secs => COALESCE(delay, 0))) AS run_at
          FROM unnest(%(j_task)b::text[], %(j_queue)b::text[], %(j_args)b::jsonb[],
                      %(j_priority)b::smallint[], %(j_max_attempts)b::int[],
                      %(j_at)b::timestamptz[], %(j_delay)b::float8[], %(j_meta)b::jsonb[])
               WITH ORDINALITY AS t(task, queue, args, priority, max_attempts, at, delay, meta,
                                    ord)
          ORDER BY ord) AS timed
    RETURNING id, state, run_at, created_at, queue
),
notified AS (
    SELECT count(pg_notify('rota_jobs', queue)) AS n
    FROM (SELECT DISTINCT queue FROM ins WHERE state = 'available') AS q
)
SELECT ins.id, ins.state, ins.run_at, ins.created_at, (SELECT n FROM notified) AS notified
FROM ins

-- name: job_insert_many_uniform
-- job_insert_many_plain for jobs that differ only in their arguments (what one
-- `enqueue_many` sends): the shared columns as scalars (`u_*`), the arguments as the one
-- array (`j_args`), and one row back: the ids drawn, and the state and times all of them
-- share. Seven arrays sent and a row read back per job had cost as much as the insert itself
-- (1,000 jobs: 14 ms against 8, the time of a bare unnest insert).
WITH ins AS (
    INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, run_at, meta, state)
    SELECT %(u_task)s::text, %(u_queue)s::text, t.args, %(u_priority)s::smallint,
           %(u_max_attempts)s::int, r.run_at, %(u_meta)s::jsonb,
           CASE WHEN r.run_at > now() THEN 'scheduled' ELSE 'available' END
    FROM (SELECT COALESCE(%(u_at)s::timestamptz,
                          now() + make_interval(secs => COALESCE(%(u_delay)s::float8, 0)))
                 AS run_at) AS r,
         unnest(%(j_args)b::jsonb[]) WITH ORDINALITY AS t(args, ord)
    ORDER BY t.ord
    RETURNING id, state, run_at, created_at, queue
)
SELECT array_agg(id ORDER BY id) AS ids, min(state) AS state, min(run_at) AS run_at,
       min(created_at) AS created_at,
       CASE WHEN min(state) = 'available' THEN pg_notify('rota_jobs', min(queue)) END
       AS notified
FROM ins

-- name: job_insert_one
-- job_insert_many for one job, with a scalar per column (`j_*`): an enqueue sends no
-- arrays to build and unpack.
WITH input AS (
    SELECT %(j_task)s::text AS task, %(j_queue)s::text AS queue, %(j_args)s::jsonb AS args,
           %(j_priority)s::smallint AS priority, %(j_max_attempts)s::int AS max_attempts,
           %(j_key)s::text AS key,
           COALESCE(%(j_at)s::timestamptz,
                    now() + make_interval(secs => COALESCE(%(j_delay)s::float8, 0))) AS run_at,
           %(j_meta)s::jsonb AS meta, %(j_partition_key)s::text AS partition_key,
           %(j_expires_at)s::timestamptz AS expires_at, %(j_requires)s::text AS requires,
           %(j_tenant)s::text AS tenant
),
ins AS (
    INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, key, run_at, meta,
                           partition_key, expires_at, requires, tenant, state)
    SELECT task, queue, args, priority, max_attempts, key, run_at, meta,
           partition_key, expires_at, string_to_array(requires, ','), tenant,
           CASE WHEN run_at > now() THEN 'scheduled' ELSE 'available' END
    FROM input
    ON CONFLICT (task, key) WHERE key IS NOT NULL AND key_active DO NOTHING
    RETURNING id, task, key, state, run_at, created_at, queue
),
gate AS (
    INSERT INTO rota_queues (name, paused, gated, updated_at)
    SELECT queue, false, true, now() FROM input AS t
    WHERE (t.partition_key IS NOT NULL OR t.expires_at IS NOT NULL OR t.requires IS NOT NULL)
      AND NOT EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = t.queue AND q.gated)
    ON CONFLICT (name) DO UPDATE SET gated = true, updated_at = now()
)
SELECT ins.*, CASE WHEN ins.state = 'available' THEN pg_notify('rota_jobs', ins.queue) END
       AS notified
FROM ins

-- name: job_insert_plain
-- job_insert_one for the common job: no idempotency key, no per-job gate, no tenant. The
-- statement of the raw insert plus the wake-up: no conflict arbiter, no queue upsert, and
-- fewer parameters to send (an enqueue's client time is mostly its statement's shape).
WITH ins AS (
    INSERT INTO rota_jobs (task, queue, args, priority, max_attempts, run_at, meta, state)
    SELECT %(j_task)s::text, %(j_queue)s::text, %(j_args)s::jsonb, %(j_priority)s::smallint,
           %(j_max_attempts)s::int, t.run_at, %(j_meta)s::jsonb,
           CASE WHEN t.run_at > now() THEN 'scheduled' ELSE 'available' END
    FROM (SELECT COALESCE(%(j_at)s::timestamptz,
                          now() + make_interval(secs => COALESCE(%(j_delay)s::float8, 0)))
                 AS run_at) AS t
    -- Only what the database drew: every value read back costs the client its parsing.
    RETURNING id, state, run_at, created_at, queue
)
SELECT ins.id, ins.state, ins.run_at, ins.created_at,
       CASE WHEN ins.state = 'available' THEN pg_notify('rota_jobs', ins.queue) END AS notified
FROM ins

-- name: job_get_by_keys
-- The jobs holding the active (task, key) pairs whose insert met a conflict.
SELECT j.* FROM rota_jobs j
JOIN unnest(%(k_task)b::text[], %(k_key)b::text[]) AS k(task, key)
  ON j.task = k.task AND j.key = k.key AND j.key_active

-- name: job_release_keys
-- Release keys whose window has passed or whose job left the states the key guards.
UPDATE rota_jobs AS j SET key_active = false
FROM unnest(%(k_task)b::text[], %(k_key)b::text[], %(k_ttl)b::float8[], %(k_states)b::text[])
     AS k(task, key, ttl, states)
WHERE j.task = k.task AND j.key = k.key AND j.key_active
  AND ((k.ttl IS NOT NULL AND j.created_at <= now() - make_interval(secs => k.ttl))
       OR (k.states IS NOT NULL AND NOT (j.state = ANY (string_to_array(k.states, ',')))))
RETURNING j.task, j.key

-- name: job_claim_plain
-- One round trip of a worker on a plain queue: write the attempts that ended (`c_*`, each
-- fenced by its lease token, rows locked in id order) and claim up to `limit` jobs, each with
-- a fresh lease token. Rows: kind 'accepted' (the ids of the completions accepted, in one
-- array), 'job' (a job claimed) and, when the queue is paused or no longer plain, one
-- 'queue' row with how it is claimed now.
-- moves: available -> running
-- moves: running -> completed, retryable, available, scheduled, discarded, cancelled
WITH cfg AS MATERIALIZED (
    SELECT paused,
           CASE WHEN fair THEN 'fair'
                WHEN global_limit IS NOT NULL OR rate_limit IS NOT NULL THEN 'limited'
                WHEN gated THEN 'gated' ELSE 'plain' END AS mode
    FROM rota_queues WHERE name = %(queue)s
),
c AS (
    SELECT * FROM unnest(%(c_id)b::bigint[], %(c_token)b::uuid[], %(c_state)b::text[],
                         %(c_delay)b::float8[], %(c_result)b::jsonb[], %(c_entry)b::jsonb[],
                         %(c_refund)b::bool[])
                  AS c(id, token, state, delay, result, entry, refund)
),
done AS (
    UPDATE rota_jobs AS j
    SET state = c.state,
        run_at = CASE WHEN c.delay IS NULL THEN j.run_at
                      ELSE now() + make_interval(secs => c.delay) END,
        finished_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled') THEN now() END,
        result = c.result,
        max_attempts = j.max_attempts + CASE WHEN c.refund THEN 1 ELSE 0 END,
        -- A NULL entry is implied, not written (COMPLETED_ENTRY in rota.drivers.base).
        history = CASE WHEN c.entry IS NULL THEN j.history
                       ELSE j.history || jsonb_build_array(c.entry || jsonb_build_object(
                           'attempt', j.attempt, 'worker', j.worker,
                           'started_at', j.attempted_at, 'finished_at', now())) END,
        lease_token = NULL,
        lease_expires_at = NULL
    FROM c
    -- The lease token alone fences (it is set exactly while the job runs): no state
    -- predicate, so the plan is driven from the primary key, never the running jobs: a
    -- nested loop over `c`, which the driver sorts by id, so rows are locked in id order.
    WHERE j.id = c.id AND j.lease_token = c.token
    -- A job made available again wakes the workers (delivered at commit).
    RETURNING j.id, CASE WHEN j.state = 'available' THEN pg_notify('rota_jobs', j.queue) END
),
picked AS (
    SELECT id FROM rota_jobs
    WHERE state = 'available' AND queue = %(queue)s
      AND NOT EXISTS (SELECT 1 FROM cfg WHERE paused OR mode <> 'plain')
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE rota_jobs AS j
    SET state = 'running',
        attempt = j.attempt + 1,
        attempted_at = now(),
        worker = %(worker)s,
        lease_token = gen_random_uuid(),
        lease_expires_at = now() + make_interval(secs => %(lease)s)
    -- = ANY (ARRAY(...)): primary-key probes, whatever the plan estimates the LIMIT to be
    -- (a generic plan guesses a tenth of the table and would hash-join a full scan).
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.task, j.queue, j.args, j.priority, j.attempt, j.max_attempts, j.run_at,
              j.created_at, j.key, j.lease_token, j.lease_expires_at, j.meta, j.checkpoint,
              j.partition_key, j.expires_at, j.requires, j.tenant, j.attempted_at, j.worker
)
-- The accepted completions come back in one row, their ids in one array: psycopg builds a
-- 24-column dict per row, and a row per id cost the worker 13% of its CPU per job.
SELECT 'accepted' AS kind, NULL::bigint AS id, NULL::text AS task, NULL::text AS queue,
       NULL::jsonb AS args,
       NULL::smallint AS priority, NULL::int AS attempt, NULL::int AS max_attempts,
       NULL::timestamptz AS run_at, NULL::timestamptz AS created_at, NULL::text AS key,
       NULL::uuid AS lease_token, NULL::timestamptz AS lease_expires_at, NULL::jsonb AS meta,
       NULL::jsonb AS checkpoint, NULL::text AS partition_key,
       NULL::timestamptz AS expires_at, NULL::text[] AS requires, NULL::text AS tenant,
       NULL::timestamptz AS attempted_at, NULL::text AS worker,
       NULL::text AS mode, NULL::bool AS paused, NULL::bool AS waiting,
       array_agg(id) AS accepted
FROM done HAVING count(*) > 0
UNION ALL
SELECT 'job', claimed.*, NULL, NULL, NULL, NULL FROM claimed
UNION ALL
SELECT 'queue', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, mode, paused, NULL, NULL
FROM cfg WHERE paused OR mode <> 'plain'

-- name: job_claim_gated
-- Like job_claim_plain, for a queue whose jobs may carry per-job gates: a job past its
-- expires_at is left for the expiry sweep; a job with a partition key runs only when no
-- earlier job of its key is waiting, running or dead; a job with required labels only by a
-- worker whose capabilities (`caps`) include them all (NULL caps: no routing filter).
-- moves: available -> running
-- moves: running -> completed, retryable, available, scheduled, discarded, cancelled
WITH cfg AS MATERIALIZED (
    SELECT paused,
           CASE WHEN fair THEN 'fair'
                WHEN global_limit IS NOT NULL OR rate_limit IS NOT NULL THEN 'limited'
                WHEN gated THEN 'gated' ELSE 'plain' END AS mode
    FROM rota_queues WHERE name = %(queue)s
),
c AS (
    SELECT * FROM unnest(%(c_id)b::bigint[], %(c_token)b::uuid[], %(c_state)b::text[],
                         %(c_delay)b::float8[], %(c_result)b::jsonb[], %(c_entry)b::jsonb[],
                         %(c_refund)b::bool[])
                  AS c(id, token, state, delay, result, entry, refund)
),
done AS (
    UPDATE rota_jobs AS j
    SET state = c.state,
        run_at = CASE WHEN c.delay IS NULL THEN j.run_at
                      ELSE now() + make_interval(secs => c.delay) END,
        finished_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled') THEN now() END,
        result = c.result,
        max_attempts = j.max_attempts + CASE WHEN c.refund THEN 1 ELSE 0 END,
        -- A NULL entry is implied, not written (COMPLETED_ENTRY in rota.drivers.base).
        history = CASE WHEN c.entry IS NULL THEN j.history
                       ELSE j.history || jsonb_build_array(c.entry || jsonb_build_object(
                           'attempt', j.attempt, 'worker', j.worker,
                           'started_at', j.attempted_at, 'finished_at', now())) END,
        lease_token = NULL,
        lease_expires_at = NULL
    FROM c
    WHERE j.id = c.id AND j.lease_token = c.token
    -- A job made available again wakes the workers (delivered at commit).
    RETURNING j.id, CASE WHEN j.state = 'available' THEN pg_notify('rota_jobs', j.queue) END
),
picked AS (
    SELECT id FROM rota_jobs AS j
    WHERE state = 'available' AND queue = %(queue)s
      AND NOT EXISTS (SELECT 1 FROM cfg WHERE paused OR mode <> 'gated')
      AND (j.expires_at IS NULL OR j.expires_at > now())
      AND (j.requires IS NULL OR j.requires <@ COALESCE(%(caps)s::text[], j.requires))
      AND (j.partition_key IS NULL OR NOT EXISTS (
          SELECT 1 FROM rota_jobs AS b
          WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
            AND b.state IN ('scheduled', 'available', 'running', 'retryable', 'discarded')))
    ORDER BY priority, run_at, id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE rota_jobs AS j
    SET state = 'running',
        attempt = j.attempt + 1,
        attempted_at = now(),
        worker = %(worker)s,
        lease_token = gen_random_uuid(),
        lease_expires_at = now() + make_interval(secs => %(lease)s)
    -- = ANY (ARRAY(...)): primary-key probes, whatever the plan estimates the LIMIT to be
    -- (a generic plan guesses a tenth of the table and would hash-join a full scan).
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.task, j.queue, j.args, j.priority, j.attempt, j.max_attempts, j.run_at,
              j.created_at, j.key, j.lease_token, j.lease_expires_at, j.meta, j.checkpoint,
              j.partition_key, j.expires_at, j.requires, j.tenant, j.attempted_at, j.worker
)
-- The accepted completions come back in one row, their ids in one array: psycopg builds a
-- 24-column dict per row, and a row per id cost the worker 13% of its CPU per job.
SELECT 'accepted' AS kind, NULL::bigint AS id, NULL::text AS task, NULL::text AS queue,
       NULL::jsonb AS args,
       NULL::smallint AS priority, NULL::int AS attempt, NULL::int AS max_attempts,
       NULL::timestamptz AS run_at, NULL::timestamptz AS created_at, NULL::text AS key,
       NULL::uuid AS lease_token, NULL::timestamptz AS lease_expires_at, NULL::jsonb AS meta,
       NULL::jsonb AS checkpoint, NULL::text AS partition_key,
       NULL::timestamptz AS expires_at, NULL::text[] AS requires, NULL::text AS tenant,
       NULL::timestamptz AS attempted_at, NULL::text AS worker,
       NULL::text AS mode, NULL::bool AS paused, NULL::bool AS waiting,
       array_agg(id) AS accepted
FROM done HAVING count(*) > 0
UNION ALL
SELECT 'job', claimed.*, NULL, NULL, NULL, NULL FROM claimed
UNION ALL
SELECT 'queue', NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, mode, paused, NULL, NULL
FROM cfg WHERE paused OR mode <> 'gated'

-- name: job_claim_limited
-- Claim from a queue with a global concurrency or rate limit, in one transaction: write
-- the attempts that ended, take the queue row's lock (the claims of that queue take turns),
-- then claim up to the room left (limit - running, rate - starts in the window; the
-- statement runs after the lock, so its snapshot sees every claim committed before),
-- log the starts for the rate window, and say whether jobs are still waiting.
-- moves: available -> running
-- include: job_complete_many
SELECT 'lock' AS kind FROM rota_queues WHERE name = %(queue)s FOR UPDATE;
WITH cfg AS (
    SELECT global_limit, rate_limit, rate_period FROM rota_queues
    WHERE name = %(queue)s AND NOT paused AND NOT fair
      AND (global_limit IS NOT NULL OR rate_limit IS NOT NULL)
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
    -- = ANY (ARRAY(...)): primary-key probes, whatever the plan estimates the LIMIT to be
    -- (a generic plan guesses a tenth of the table and would hash-join a full scan).
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.task, j.queue, j.args, j.priority, j.attempt, j.max_attempts, j.run_at,
              j.created_at, j.key, j.lease_token, j.lease_expires_at, j.meta, j.checkpoint,
              j.partition_key, j.expires_at, j.requires, j.tenant, j.attempted_at, j.worker
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
SELECT 'job' AS kind, claimed.* FROM claimed;
-- include: queue_claim_status

-- name: job_complete_many
-- Write attempt outcomes (`c_*`), each fenced by its lease token, rows locked in id order;
-- returns the ids accepted. A job made available again (returned at shutdown, snoozed or
-- retried with no delay) wakes the workers, so one takes it at once.
-- moves: running -> completed, retryable, available, scheduled, discarded, cancelled
WITH c AS (
    SELECT * FROM unnest(%(c_id)b::bigint[], %(c_token)b::uuid[], %(c_state)b::text[],
                         %(c_delay)b::float8[], %(c_result)b::jsonb[], %(c_entry)b::jsonb[],
                         %(c_refund)b::bool[])
                  AS c(id, token, state, delay, result, entry, refund)
)
UPDATE rota_jobs AS j
SET state = c.state,
    run_at = CASE WHEN c.delay IS NULL THEN j.run_at
                  ELSE now() + make_interval(secs => c.delay) END,
    finished_at = CASE WHEN c.state IN ('completed', 'discarded', 'cancelled') THEN now() END,
    result = c.result,
    max_attempts = j.max_attempts + CASE WHEN c.refund THEN 1 ELSE 0 END,
    -- A NULL entry is implied, not written (COMPLETED_ENTRY in rota.drivers.base).
    history = CASE WHEN c.entry IS NULL THEN j.history
                   ELSE j.history || jsonb_build_array(c.entry || jsonb_build_object(
                       'attempt', j.attempt, 'worker', j.worker,
                       'started_at', j.attempted_at, 'finished_at', now())) END,
    lease_token = NULL,
    lease_expires_at = NULL
FROM c
WHERE j.id = c.id AND j.lease_token = c.token
RETURNING 'done' AS kind, j.id, j.state, j.queue,
          CASE WHEN j.state = 'available' THEN pg_notify('rota_jobs', j.queue) END AS notified

-- name: job_lease_renew
-- Extend the leases a worker still holds (rows locked in id order, found by primary key);
-- a missing row means the lease was lost.
WITH c AS (
    SELECT * FROM unnest(%(c_id)b::bigint[], %(c_token)b::uuid[]) AS c(id, token)
)
UPDATE rota_jobs AS j
SET lease_expires_at = now() + make_interval(secs => %(lease)s)
FROM c
WHERE j.id = c.id AND j.lease_token = c.token
RETURNING j.id, j.lease_token::text, j.cancel_requested

-- name: job_checkpoint
-- Store a running job's progress, fenced by its lease token.
UPDATE rota_jobs SET checkpoint = %(value)s::jsonb
WHERE id = %(id)s AND lease_token = %(token)s::uuid
RETURNING id

-- name: job_claim
-- Claim one given job if it is runnable: available, or waiting and due (rota.testing.inline
-- runs the job it enqueued; `rota run` claims its own job again after each backoff).
-- moves: available, scheduled, retryable -> running
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

-- name: job_rescue_expired
-- Return jobs whose lease expired to the queue (or dead-letter them when out of attempts).
-- moves: running -> available, discarded, cancelled
-- job_rescue_orphaned (presence.sql) repeats this SET list: change the two together.
WITH expired AS (
    SELECT id FROM rota_jobs
    WHERE state = 'running' AND lease_expires_at < now()
    ORDER BY id
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
WHERE j.id = ANY (ARRAY(SELECT id FROM expired))
RETURNING j.id, j.state, CASE WHEN j.state = 'available' THEN pg_notify('rota_jobs', j.queue) END

-- name: job_next_due
-- Seconds until the earliest scheduled or retryable job is due (negative: overdue; NULL:
-- none waits). The stager rests until then where it hears of every commit.
SELECT EXTRACT(EPOCH FROM min(run_at) - now())::float8 AS due_in
FROM rota_jobs WHERE state IN ('scheduled', 'retryable')

-- name: job_stage_due
-- Make scheduled and retryable jobs due within `horizon` seconds (0: now) available; wake workers.
-- moves: scheduled, retryable -> available
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
    WHERE j.id = ANY (ARRAY(SELECT id FROM due)) RETURNING j.queue
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
-- moves: scheduled, available, retryable -> cancelled
-- moves: running -> running
UPDATE rota_jobs
SET state = CASE WHEN state = 'running' THEN 'running' ELSE 'cancelled' END,
    cancel_requested = (state = 'running'),
    finished_at = CASE WHEN state = 'running' THEN NULL ELSE now() END
WHERE id = %(id)s AND state IN ('scheduled', 'available', 'retryable', 'running')
RETURNING *, pg_notify('rota_control', 'cancel:' || id)

-- name: job_retry
-- Put a finished or waiting job back in the queue now, with one more attempt if needed.
-- moves: scheduled, retryable, completed, discarded, cancelled -> available
UPDATE rota_jobs
SET state = 'available',
    run_at = now(),
    finished_at = NULL,
    cancel_requested = false,
    max_attempts = GREATEST(max_attempts, attempt + 1),
    -- A completed attempt's implied entry is stored before the job runs again.
    history = CASE WHEN state = 'completed'
                        AND (history -> -1 ->> 'attempt')::int IS DISTINCT FROM attempt
                   THEN history || jsonb_build_array(jsonb_build_object(
                       'attempt', attempt, 'worker', worker, 'started_at', attempted_at,
                       'finished_at', finished_at, 'outcome', 'completed'))
                   ELSE history END
WHERE id = %(id)s AND state IN ('scheduled', 'retryable', 'completed', 'discarded', 'cancelled')
RETURNING *, pg_notify('rota_jobs', queue)

-- name: job_prune_finished
-- Delete one batch of finished jobs of one state past its retention, oldest first, read
-- from rota_jobs_finished_state_idx (state, finished_at); SKIP LOCKED keeps it off running work.
WITH old AS (
    SELECT id FROM rota_jobs
    WHERE state IN ('completed', 'discarded', 'cancelled') AND state = %(state)s
      AND finished_at < now() - make_interval(secs => %(age)s)
    ORDER BY finished_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
DELETE FROM rota_jobs WHERE id = ANY (ARRAY(SELECT id FROM old))

-- name: queue_claim_status
-- How a queue is claimed now (its mode: fair, limited, gated or plain), whether it is
-- paused, and whether jobs are waiting in it (after this transaction's claim).
SELECT 'queue' AS kind,
       CASE WHEN fair THEN 'fair'
            WHEN global_limit IS NOT NULL OR rate_limit IS NOT NULL THEN 'limited'
            WHEN gated THEN 'gated' ELSE 'plain' END AS mode,
       paused,
       -- The first job in claim order, not EXISTS: a generic plan may answer EXISTS with a
       -- scan that stops at the first match, which reads the whole table when none waits.
       (SELECT id FROM rota_jobs WHERE state = 'available' AND queue = %(queue)s
        ORDER BY priority, run_at, id LIMIT 1) IS NOT NULL AS waiting
FROM rota_queues WHERE name = %(queue)s
-- name: job_next_expiry
-- Seconds until the earliest waiting job's start deadline passes (negative: passed; NULL:
-- no waiting job has one). The expirer rests until then where it hears of every commit.
SELECT EXTRACT(EPOCH FROM min(expires_at) - now())::float8 AS due_in
FROM rota_jobs
WHERE expires_at IS NOT NULL AND state IN ('scheduled', 'available', 'retryable')

-- name: job_expire_due
-- Dead-letter waiting jobs whose start deadline passed (reason `expired`).
-- moves: scheduled, available, retryable -> discarded
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
WHERE j.id = ANY (ARRAY(SELECT id FROM due))
RETURNING j.id

