-- name: web_job_search
-- Jobs matching `q`, newest first, narrowed by the other filters: the job whose id or
-- idempotency key `q` is, found through their indexes at any age; when there is none,
-- jobs of task `q` or (with `args`) with `q` in their arguments among the newest `scan`
-- jobs, so a search never reads the whole history (docs/dashboard.md#search).
WITH exact AS MATERIALIZED (
    SELECT id FROM rota_jobs WHERE id = %(q_id)s::bigint
    UNION
    SELECT id FROM rota_jobs WHERE key = %(q)s::text
),
hits AS (
    SELECT id FROM exact
    UNION
    -- Only when `q` names no job by id or key: the task, or text in the arguments, among
    -- the newest `scan`. The guard empties the id range when `exact` found a job; the
    -- literal LIMIT (SEARCH_SCAN, rota.web.records) tells the planner how few rows this
    -- reads: from the range alone it guesses a third of the table, and beside 10M jobs
    -- that cost made PostgreSQL JIT-compile the statement (~250 ms) for a 1 ms lookup.
    SELECT id FROM (
        SELECT id, task, args FROM rota_jobs
        WHERE id > CASE WHEN EXISTS (SELECT 1 FROM exact) THEN 9223372036854775807
                        ELSE (SELECT max(id) FROM rota_jobs) - %(scan)s::bigint END
        ORDER BY id DESC
        LIMIT 50000
    ) AS newest
    WHERE task = %(q)s::text
       OR (%(args)s::bool AND strpos(lower(args::text), lower(%(q)s::text)) > 0)
)
SELECT * FROM rota_jobs
WHERE id = ANY (ARRAY(SELECT id FROM hits))
  AND (%(id)s::bigint IS NULL OR id = %(id)s::bigint)
  AND (%(key)s::text IS NULL OR key = %(key)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (cardinality(%(states)s::text[]) = 0 OR state = ANY(%(states)s::text[]))
  AND (%(text)s::text IS NULL OR strpos(lower(args::text), lower(%(text)s::text)) > 0)
  AND id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
ORDER BY id DESC
LIMIT %(limit)s

-- name: web_job_list
-- Jobs matching the filters, newest first (the jobs page, the overview's failures). Each
-- state is read through its own index, newest first, so a rare state is found without
-- walking the common ones (a branch whose state is not asked for is skipped at run time);
-- an id or a key goes through its index; text in the arguments is looked for only among
-- the newest `scan` jobs.
-- The state branches differ only in their state, and stay apart: PostgreSQL uses a partial
-- index only for a state written in the statement. One branch over the states asked for
-- (a LATERAL join over unnest(states), tried) walks the primary key down and filters, so
-- a rare state is found only after reading past the common ones.
SELECT p.* FROM (
    (SELECT j.* FROM rota_jobs AS j WHERE j.id = %(id)s::bigint)
    UNION ALL
    (SELECT j.* FROM rota_jobs AS j WHERE %(id)s::bigint IS NULL AND j.key = %(key)s::text)
    UNION ALL
    (SELECT j.* FROM rota_jobs AS j
     WHERE %(id)s::bigint IS NULL AND %(key)s::text IS NULL AND cardinality(%(states)s::text[]) = 0
       AND j.id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
       AND j.id > CASE WHEN %(text)s::text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - %(scan)s::bigint END
       AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
       AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
       AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
       AND (%(text)s::text IS NULL OR strpos(lower(j.args::text), lower(%(text)s::text)) > 0)
     ORDER BY j.id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT j.* FROM rota_jobs AS j
     WHERE %(id)s::bigint IS NULL AND %(key)s::text IS NULL AND 'discarded' = ANY(%(states)s::text[]) AND j.state = 'discarded'
       AND j.id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
       AND j.id > CASE WHEN %(text)s::text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - %(scan)s::bigint END
       AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
       AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
       AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
       AND (%(text)s::text IS NULL OR strpos(lower(j.args::text), lower(%(text)s::text)) > 0)
     ORDER BY j.id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT j.* FROM rota_jobs AS j
     WHERE %(id)s::bigint IS NULL AND %(key)s::text IS NULL AND 'cancelled' = ANY(%(states)s::text[]) AND j.state = 'cancelled'
       AND j.id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
       AND j.id > CASE WHEN %(text)s::text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - %(scan)s::bigint END
       AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
       AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
       AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
       AND (%(text)s::text IS NULL OR strpos(lower(j.args::text), lower(%(text)s::text)) > 0)
     ORDER BY j.id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT j.* FROM rota_jobs AS j
     WHERE %(id)s::bigint IS NULL AND %(key)s::text IS NULL AND 'completed' = ANY(%(states)s::text[]) AND j.state = 'completed'
       AND j.id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
       AND j.id > CASE WHEN %(text)s::text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - %(scan)s::bigint END
       AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
       AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
       AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
       AND (%(text)s::text IS NULL OR strpos(lower(j.args::text), lower(%(text)s::text)) > 0)
     ORDER BY j.id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT j.* FROM rota_jobs AS j
     WHERE %(id)s::bigint IS NULL AND %(key)s::text IS NULL AND 'available' = ANY(%(states)s::text[]) AND j.state = 'available'
       AND j.id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
       AND j.id > CASE WHEN %(text)s::text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - %(scan)s::bigint END
       AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
       AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
       AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
       AND (%(text)s::text IS NULL OR strpos(lower(j.args::text), lower(%(text)s::text)) > 0)
     ORDER BY j.id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT j.* FROM rota_jobs AS j
     WHERE %(id)s::bigint IS NULL AND %(key)s::text IS NULL AND 'running' = ANY(%(states)s::text[]) AND j.state = 'running'
       AND j.id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
       AND j.id > CASE WHEN %(text)s::text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - %(scan)s::bigint END
       AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
       AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
       AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
       AND (%(text)s::text IS NULL OR strpos(lower(j.args::text), lower(%(text)s::text)) > 0)
     ORDER BY j.id DESC LIMIT %(limit)s)
    UNION ALL
    (SELECT j.* FROM rota_jobs AS j
     WHERE %(id)s::bigint IS NULL AND %(key)s::text IS NULL AND ('scheduled' = ANY(%(states)s::text[]) OR 'retryable' = ANY(%(states)s::text[]))
       AND j.state IN ('scheduled', 'retryable') AND j.state = ANY(%(states)s::text[])
       AND j.id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
       AND j.id > CASE WHEN %(text)s::text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - %(scan)s::bigint END
       AND (%(task)s::text IS NULL OR j.task = %(task)s::text)
       AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
       AND (%(tenant)s::text IS NULL OR j.tenant = %(tenant)s::text)
       AND (%(text)s::text IS NULL OR strpos(lower(j.args::text), lower(%(text)s::text)) > 0)
     ORDER BY j.id DESC LIMIT %(limit)s)
) AS p
WHERE p.id < COALESCE(%(before_id)s::bigint, 9223372036854775807)
  AND (%(key)s::text IS NULL OR p.key = %(key)s::text)
  AND (%(task)s::text IS NULL OR p.task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR p.queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR p.tenant = %(tenant)s::text)
  AND (cardinality(%(states)s::text[]) = 0 OR p.state = ANY(%(states)s::text[]))
  AND (%(text)s::text IS NULL OR strpos(lower(p.args::text), lower(%(text)s::text)) > 0)
ORDER BY p.id DESC
LIMIT %(limit)s

-- name: web_queue_series
-- Jobs enqueued and finished per queue and time bucket over the last `window` seconds, at
-- a minute's resolution: the per-minute flow (0019) and the changes not folded into it yet.
WITH n AS (SELECT now() - make_interval(secs => %(window)s) AS since),
flow AS (
    SELECT queue, kind, minute AS at, n FROM rota_job_flow, n
    WHERE minute >= date_trunc('minute', n.since)
    UNION ALL
    SELECT queue, 'enqueued', at, inserted FROM rota_job_deltas, n
    WHERE inserted > 0 AND at >= n.since
    UNION ALL
    SELECT queue, state, at, entered FROM rota_job_deltas, n
    WHERE entered > 0 AND state IN ('completed', 'discarded', 'cancelled') AND at >= n.since
)
SELECT queue, kind,
       floor(EXTRACT(EPOCH FROM flow.at - n.since) / %(bucket)s)::int AS bucket,
       sum(flow.n)::bigint AS n
FROM flow, n
GROUP BY 1, 2, 3

-- name: web_worker_list
-- Workers seen lately: those running jobs now (from the running jobs' index), or that
-- started one in the last `window` seconds (rota_workers_seen and the unfolded changes).
WITH seen AS (
    SELECT worker, queue, 1 AS running, attempted_at AS at FROM rota_jobs
    WHERE state = 'running' AND worker IS NOT NULL
    UNION ALL
    SELECT worker, queue, 0, last_seen FROM rota_workers_seen
    WHERE last_seen >= now() - make_interval(secs => %(window)s)
    UNION ALL
    SELECT worker, queue, 0, at FROM rota_job_deltas
    WHERE worker IS NOT NULL AND entered > 0 AND at >= now() - make_interval(secs => %(window)s)
)
SELECT worker, sum(running) AS running, string_agg(DISTINCT queue, ',') AS queues,
       max(at) AS last_seen
FROM seen
GROUP BY worker
ORDER BY worker

-- name: web_leader_list
-- Leadership rows and whether each lease is still live.
SELECT name, leader, elected_at, expires_at, expires_at > now() AS live
FROM rota_leaders
ORDER BY name
