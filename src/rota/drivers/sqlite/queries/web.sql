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
  AND (:states = '[]' OR state IN (SELECT value FROM json_each(:states)))
  AND (:text IS NULL OR instr(lower(args), lower(:text)) > 0)
ORDER BY id DESC
LIMIT :limit

-- name: web_queue_series
-- Jobs enqueued and finished per queue and time bucket over the last `window` seconds, at
-- a minute's resolution, from the per-minute flow the triggers of 0019 keep.
WITH n AS (SELECT (julianday('now') - 2440587.5) * 86400.0 - :window AS since)
SELECT queue, kind, CAST(floor((minute - n.since) / :bucket) AS INTEGER) AS bucket,
       sum(f.n) AS n
FROM rota_job_flow AS f, n
WHERE minute >= CAST(n.since / 60 AS INTEGER) * 60.0
GROUP BY queue, kind, 3

-- name: web_worker_list
-- Workers seen lately: those running jobs now (from the running jobs' index), or that
-- started one in the last `window` seconds (rota_workers_seen, kept by the triggers).
WITH seen AS (
    SELECT worker, queue, 1 AS running, attempted_at AS at FROM rota_jobs
    WHERE state = 'running' AND worker IS NOT NULL
    UNION ALL
    SELECT worker, queue, 0, last_seen FROM rota_workers_seen
    WHERE last_seen >= (julianday('now') - 2440587.5) * 86400.0 - :window
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
