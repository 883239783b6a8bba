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
    SELECT id FROM rota_jobs
    WHERE NOT EXISTS (SELECT 1 FROM exact)
      AND id > (SELECT max(id) FROM rota_jobs) - :scan
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
-- Jobs matching the filters, newest first (the jobs page, the overview's failures): each
-- state from its own index, an id or a key through its index, text in the arguments only
-- among the newest `scan` jobs (see the PostgreSQL query of the same name).
SELECT p.* FROM (
    SELECT j.* FROM rota_jobs AS j WHERE j.id = :id
    UNION ALL
    SELECT j.* FROM rota_jobs AS j WHERE :id IS NULL AND j.key = :key
    UNION ALL
    SELECT * FROM (SELECT j.* FROM rota_jobs AS j
     WHERE :id IS NULL AND :key IS NULL AND :states = '[]'
       AND j.id < COALESCE(:before_id, 9223372036854775807)
       AND j.id > CASE WHEN :text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - :scan END
       AND (:task IS NULL OR j.task = :task)
       AND (:queue IS NULL OR j.queue = :queue)
       AND (:text IS NULL OR instr(lower(j.args), lower(:text)) > 0)
     ORDER BY j.id DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (SELECT j.* FROM rota_jobs AS j
     WHERE :id IS NULL AND :key IS NULL AND 'discarded' IN (SELECT value FROM json_each(:states)) AND j.state = 'discarded'
       AND j.id < COALESCE(:before_id, 9223372036854775807)
       AND j.id > CASE WHEN :text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - :scan END
       AND (:task IS NULL OR j.task = :task)
       AND (:queue IS NULL OR j.queue = :queue)
       AND (:text IS NULL OR instr(lower(j.args), lower(:text)) > 0)
     ORDER BY j.id DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (SELECT j.* FROM rota_jobs AS j
     WHERE :id IS NULL AND :key IS NULL AND 'cancelled' IN (SELECT value FROM json_each(:states)) AND j.state = 'cancelled'
       AND j.id < COALESCE(:before_id, 9223372036854775807)
       AND j.id > CASE WHEN :text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - :scan END
       AND (:task IS NULL OR j.task = :task)
       AND (:queue IS NULL OR j.queue = :queue)
       AND (:text IS NULL OR instr(lower(j.args), lower(:text)) > 0)
     ORDER BY j.id DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (SELECT j.* FROM rota_jobs AS j
     WHERE :id IS NULL AND :key IS NULL AND 'completed' IN (SELECT value FROM json_each(:states)) AND j.state = 'completed'
       AND j.id < COALESCE(:before_id, 9223372036854775807)
       AND j.id > CASE WHEN :text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - :scan END
       AND (:task IS NULL OR j.task = :task)
       AND (:queue IS NULL OR j.queue = :queue)
       AND (:text IS NULL OR instr(lower(j.args), lower(:text)) > 0)
     ORDER BY j.id DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (SELECT j.* FROM rota_jobs AS j
     WHERE :id IS NULL AND :key IS NULL AND 'available' IN (SELECT value FROM json_each(:states)) AND j.state = 'available'
       AND j.id < COALESCE(:before_id, 9223372036854775807)
       AND j.id > CASE WHEN :text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - :scan END
       AND (:task IS NULL OR j.task = :task)
       AND (:queue IS NULL OR j.queue = :queue)
       AND (:text IS NULL OR instr(lower(j.args), lower(:text)) > 0)
     ORDER BY j.id DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (SELECT j.* FROM rota_jobs AS j
     WHERE :id IS NULL AND :key IS NULL AND 'running' IN (SELECT value FROM json_each(:states)) AND j.state = 'running'
       AND j.id < COALESCE(:before_id, 9223372036854775807)
       AND j.id > CASE WHEN :text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - :scan END
       AND (:task IS NULL OR j.task = :task)
       AND (:queue IS NULL OR j.queue = :queue)
       AND (:text IS NULL OR instr(lower(j.args), lower(:text)) > 0)
     ORDER BY j.id DESC LIMIT :limit)
    UNION ALL
    SELECT * FROM (SELECT j.* FROM rota_jobs AS j
     WHERE :id IS NULL AND :key IS NULL AND ('scheduled' IN (SELECT value FROM json_each(:states)) OR 'retryable' IN (SELECT value FROM json_each(:states)))
       AND j.state IN ('scheduled', 'retryable')
       AND j.state IN (SELECT value FROM json_each(:states))
       AND j.id < COALESCE(:before_id, 9223372036854775807)
       AND j.id > CASE WHEN :text IS NULL THEN 0
                       ELSE (SELECT max(id) FROM rota_jobs) - :scan END
       AND (:task IS NULL OR j.task = :task)
       AND (:queue IS NULL OR j.queue = :queue)
       AND (:text IS NULL OR instr(lower(j.args), lower(:text)) > 0)
     ORDER BY j.id DESC LIMIT :limit)
) AS p
WHERE p.id < COALESCE(:before_id, 9223372036854775807)
  AND (:key IS NULL OR p.key = :key)
  AND (:task IS NULL OR p.task = :task)
  AND (:queue IS NULL OR p.queue = :queue)
  AND (:states = '[]' OR p.state IN (SELECT value FROM json_each(:states)))
  AND (:text IS NULL OR instr(lower(p.args), lower(:text)) > 0)
ORDER BY p.id DESC
LIMIT :limit

-- name: web_queue_series
-- Jobs enqueued and finished per queue and time bucket over the last `window` seconds.
WITH n AS (SELECT (julianday('now') - 2440587.5) * 86400.0 AS now)
SELECT queue, 'enqueued' AS kind,
       CAST((created_at - (n.now - :window)) / :bucket AS INTEGER) AS bucket, count(*) AS n
FROM rota_jobs, n
WHERE created_at >= n.now - :window
GROUP BY queue, bucket
UNION ALL
SELECT queue, state AS kind,
       CAST((finished_at - (n.now - :window)) / :bucket AS INTEGER) AS bucket, count(*) AS n
FROM rota_jobs, n
WHERE state IN ('completed', 'discarded', 'cancelled') AND finished_at >= n.now - :window
GROUP BY queue, state, bucket

-- name: web_worker_list
-- Workers seen lately: those running jobs now, or that started one in the last `window` s.
SELECT worker,
       sum(CASE WHEN state = 'running' THEN 1 ELSE 0 END) AS running,
       group_concat(DISTINCT queue) AS queues,
       max(attempted_at) AS last_seen
FROM rota_jobs
WHERE worker IS NOT NULL
  AND (state = 'running'
       OR attempted_at >= (julianday('now') - 2440587.5) * 86400.0 - :window)
GROUP BY worker
ORDER BY worker

-- name: web_leader_list
-- Leadership rows and whether each lease is still live.
SELECT name, leader, elected_at, expires_at,
       expires_at > (julianday('now') - 2440587.5) * 86400.0 AS live
FROM rota_leaders
ORDER BY name
