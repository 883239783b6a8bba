-- name: web_job_search
-- Jobs matching `q`, newest first, narrowed by the other filters: the job whose id or
-- idempotency key `q` is, found through their indexes at any age; when there is none,
-- jobs of task `q` or (with `args`) with `q` in their arguments among the newest `scan`
-- jobs, so a search never reads the whole history (docs/dashboard.md#search).
WITH exact AS MATERIALIZED (
    SELECT id FROM rota_jobs WHERE id = :q_id
    UNION
    SELECT id FROM rota_jobs WHERE key = :q
),
hits AS (
    SELECT id FROM exact
    UNION
    -- Only when `q` names no job by id or key: the task, or text in the arguments.
    -- (An empty id range when it does: SQLite would test a guard on every row.)
    SELECT id FROM rota_jobs
    WHERE id > CASE WHEN EXISTS (SELECT 1 FROM exact) THEN 9223372036854775807
                    ELSE (SELECT max(id) FROM rota_jobs) - :scan END
      AND (task = :q OR (:args AND instr(lower(args), lower(:q)) > 0))
)
SELECT * FROM rota_jobs
WHERE id IN (SELECT id FROM hits)
  AND (:id IS NULL OR id = :id)
  AND (:key IS NULL OR key = :key)
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND (:states = '[]' OR state IN (SELECT value FROM json_each(:states)))
  AND (:text IS NULL OR instr(lower(args), lower(:text)) > 0)
  AND id < COALESCE(:before_id, 9223372036854775807)
ORDER BY id DESC
LIMIT :limit

-- name: web_job_list
-- Jobs matching the filters, newest first (the jobs page, the overview's failures): an id
-- or a key through its index; otherwise the primary key walked down from `before_id`
-- until `limit` match (a branch per state, as on PostgreSQL, made SQLite sort each one),
-- and text in the arguments only among the newest `scan` jobs.
SELECT * FROM (
    SELECT * FROM rota_jobs WHERE id = :id
    UNION ALL
    SELECT * FROM rota_jobs WHERE :id IS NULL AND key = :key
    UNION ALL
    SELECT * FROM (
        SELECT * FROM rota_jobs
        WHERE :id IS NULL AND :key IS NULL
          AND (:task IS NULL OR task = :task)
          AND (:queue IS NULL OR queue = :queue)
          AND (:tenant IS NULL OR tenant = :tenant)
          AND (:states = '[]' OR state IN (SELECT value FROM json_each(:states)))
          AND (:text IS NULL OR instr(lower(args), lower(:text)) > 0)
          AND id < COALESCE(:before_id, 9223372036854775807)
          AND id > CASE WHEN :text IS NULL THEN 0
                        ELSE (SELECT max(id) FROM rota_jobs) - :scan END
        ORDER BY id DESC
        LIMIT :limit)
) AS p
WHERE id < COALESCE(:before_id, 9223372036854775807)
  AND (:key IS NULL OR key = :key)
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND (:states = '[]' OR state IN (SELECT value FROM json_each(:states)))
  AND (:text IS NULL OR instr(lower(args), lower(:text)) > 0)
ORDER BY id DESC
LIMIT :limit

-- name: web_queue_series
-- Jobs enqueued and finished per queue and time bucket over the last `window` seconds, at
-- a minute's resolution: the flow the leader's passes recorded, and the counters' growth
-- and the jobs enqueued since its last pass (as of half a second ago: the last bucket).
WITH n AS (SELECT (julianday('now') - 2440587.5) * 86400.0 AS now,
                  (julianday('now') - 2440587.5) * 86400.0 - :window AS since),
flow AS (
    SELECT queue, kind, minute AS at, f.n AS k FROM rota_job_flow AS f, n
    WHERE minute >= CAST(n.since / 60 AS INTEGER) * 60
    UNION ALL
    SELECT c.queue, c.state, n.now - 0.5, c.entered - COALESCE(m.entered, 0)
    FROM rota_job_counts AS c
    LEFT JOIN rota_job_marks AS m
           ON m.queue = c.queue AND m.state = c.state AND m.worker = c.worker, n
    WHERE c.entered > COALESCE(m.entered, 0)
    UNION ALL
    SELECT queue, 'enqueued', n.now - 0.5, 1 FROM rota_jobs, n
    WHERE id > COALESCE((SELECT entered FROM rota_job_marks
                         WHERE queue = '' AND state = 'enqueued' AND worker = ''), 0)
)
SELECT queue, kind, CAST(floor((at - n.since) / :bucket) AS INTEGER) AS bucket, sum(k) AS n
FROM flow, n
GROUP BY queue, kind, 3

-- name: web_worker_list
-- Workers seen lately: those running jobs now (from the running jobs' index), or that
-- finished one in the last `window` seconds (the counters kept per worker, 0019).
WITH seen AS (
    SELECT worker, queue, 1 AS running, attempted_at AS at FROM rota_jobs
    WHERE state = 'running' AND worker IS NOT NULL
    UNION ALL
    SELECT worker, queue, 0, last_at FROM rota_job_counts
    WHERE worker <> '' AND last_at >= (julianday('now') - 2440587.5) * 86400.0 - :window
)
SELECT worker, sum(running) AS running, group_concat(DISTINCT queue) AS queues,
       max(at) AS last_seen
FROM seen
GROUP BY worker
ORDER BY worker

-- name: web_leader_list
-- Leadership rows and whether each lease is still live.
SELECT name, leader, elected_at, expires_at,
       expires_at > (julianday('now') - 2440587.5) * 86400.0 AS live
FROM rota_leaders
ORDER BY name
