-- name: web_job_search
-- Jobs for the dashboard and HTTP API search, newest first. `q` matches an id, an
-- idempotency key, a task name or text in the arguments; the other filters narrow it.
SELECT * FROM rota_jobs
WHERE (%(q)s::text IS NULL OR id = %(q_id)s::bigint OR key = %(q)s::text
       OR task = %(q)s::text OR strpos(lower(args::text), lower(%(q)s::text)) > 0)
  AND (%(id)s::bigint IS NULL OR id = %(id)s::bigint)
  AND (%(key)s::text IS NULL OR key = %(key)s::text)
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(tenant)s::text IS NULL OR tenant = %(tenant)s::text)
  AND (cardinality(%(states)s::text[]) = 0 OR state = ANY(%(states)s::text[]))
  AND (%(text)s::text IS NULL OR strpos(lower(args::text), lower(%(text)s::text)) > 0)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s

-- name: web_queue_series
-- Jobs enqueued and finished per queue and time bucket over the last `window` seconds.
WITH n AS (SELECT now() - make_interval(secs => %(window)s) AS since)
SELECT queue, 'enqueued' AS kind,
       floor(EXTRACT(EPOCH FROM created_at - n.since) / %(bucket)s)::int AS bucket,
       count(*) AS n
FROM rota_jobs, n
WHERE created_at >= n.since
GROUP BY queue, 3
UNION ALL
SELECT queue, state AS kind,
       floor(EXTRACT(EPOCH FROM finished_at - n.since) / %(bucket)s)::int AS bucket,
       count(*) AS n
FROM rota_jobs, n
WHERE state IN ('completed', 'discarded', 'cancelled') AND finished_at >= n.since
GROUP BY queue, state, 3

-- name: web_worker_list
-- Workers seen lately: those running jobs now, or that started one in the last `window` s.
SELECT worker,
       count(*) FILTER (WHERE state = 'running') AS running,
       string_agg(DISTINCT queue, ',') AS queues,
       max(attempted_at) AS last_seen
FROM rota_jobs
WHERE worker IS NOT NULL
  AND (state = 'running' OR attempted_at >= now() - make_interval(secs => %(window)s))
GROUP BY worker
ORDER BY worker

-- name: web_leader_list
-- Leadership rows and whether each lease is still live.
SELECT name, leader, elected_at, expires_at, expires_at > now() AS live
FROM rota_leaders
ORDER BY name
