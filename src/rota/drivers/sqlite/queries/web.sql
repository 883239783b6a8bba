-- name: web_job_search
-- Jobs for the dashboard and HTTP API search, newest first. `q` matches an id, an
-- idempotency key, a task name or text in the arguments; the other filters narrow it.
SELECT * FROM rota_jobs
WHERE (:q IS NULL OR id = :q_id OR key = :q OR task = :q
       OR instr(lower(args), lower(:q)) > 0)
  AND (:id IS NULL OR id = :id)
  AND (:key IS NULL OR key = :key)
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
  AND (:tenant IS NULL OR tenant = :tenant)
  AND (:states = '[]' OR state IN (SELECT value FROM json_each(:states)))
  AND (:text IS NULL OR instr(lower(args), lower(:text)) > 0)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC
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
