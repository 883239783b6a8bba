-- name: queue_counts
-- Jobs per queue and state: the counts the leader folded and the changes not folded yet
-- (0019), never a count over rota_jobs.
SELECT queue, state, sum(n)::bigint AS n
FROM (SELECT queue, state, n FROM rota_job_counts
      UNION ALL
      SELECT queue, state, n FROM rota_job_deltas) AS c
GROUP BY queue, state
HAVING sum(n) <> 0

-- name: queue_oldest
-- Seconds the oldest runnable job of each queue has waited. The claim index (queue,
-- priority, run_at, id) holds each (queue, priority)'s oldest job first: hop from one
-- such head to the next (one index descent each) instead of reading the whole backlog.
-- A MIN over the backlog read every waiting job on every scrape and overview poll (133 ms
-- beside 1M waiting jobs), and with statistics taken before a drain (all those jobs
-- believed waiting) the planner scanned the whole table for it.
WITH RECURSIVE heads AS (
    (SELECT queue, priority, run_at FROM rota_jobs
     WHERE state = 'available'
     ORDER BY queue, priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT n.queue, n.priority, n.run_at
    FROM heads AS h
    CROSS JOIN LATERAL (SELECT j.queue, j.priority, j.run_at FROM rota_jobs AS j
                        WHERE j.state = 'available'
                          AND (j.queue, j.priority) > (h.queue, h.priority)
                        ORDER BY j.queue, j.priority, j.run_at, j.id LIMIT 1) AS n
)
SELECT queue, EXTRACT(EPOCH FROM now() - MIN(run_at))::float8 AS age
FROM heads GROUP BY queue

-- name: queue_settings
-- Stored queue settings.
SELECT name, paused FROM rota_queues

-- name: queue_set_paused
-- Pause or resume a queue; it survives restarts.
INSERT INTO rota_queues (name, paused, updated_at) VALUES (%(name)s, %(paused)s, now())
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = now()
RETURNING pg_notify('rota_jobs', name)

-- name: queue_backlog
-- One queue's scaling signals, read through the functions KEDA calls (0004_keda).
SELECT rota_keda_backlog(%(queue)s) AS backlog,
       rota_keda_running(%(queue)s) AS running,
       rota_keda_oldest_age(%(queue)s) AS oldest_age_s

-- name: queue_durations
-- How many jobs of one queue completed in the last `window` seconds, and their mean run time.
SELECT count(*) AS samples,
       avg(EXTRACT(EPOCH FROM finished_at - attempted_at))::float8 AS mean_s
FROM rota_jobs
WHERE state = 'completed' AND queue = %(queue)s
  AND finished_at >= now() - make_interval(secs => %(window)s)

-- name: queue_keda_backlog
-- KEDA's query for a queue's runnable jobs (rendered with the queue name as a literal).
SELECT rota_keda_backlog(%(queue)s)

-- name: queue_keda_demand
-- KEDA's query for a queue's runnable plus running jobs (the default signal).
SELECT rota_keda_backlog(%(queue)s) + rota_keda_running(%(queue)s)

-- name: queue_controls_list
-- Stored controls of one queue (or all when name is NULL).
SELECT name, paused, global_limit, rate_limit, rate_period, updated_at FROM rota_queues
WHERE %(name)s::text IS NULL OR name = %(name)s::text
ORDER BY name

-- name: queue_configure
-- Set or clear a queue's global limit and rate limit (the flags say which to change);
-- workers read them on their next claim, and are woken to do so.
INSERT INTO rota_queues (name, paused, global_limit, rate_limit, rate_period, updated_at)
VALUES (%(name)s, false, %(global_limit)s, %(rate_limit)s, %(rate_period)s, now())
ON CONFLICT (name) DO UPDATE SET
    global_limit = CASE WHEN %(set_global)s THEN excluded.global_limit
                        ELSE rota_queues.global_limit END,
    rate_limit = CASE WHEN %(set_rate)s THEN excluded.rate_limit ELSE rota_queues.rate_limit END,
    rate_period = CASE WHEN %(set_rate)s THEN excluded.rate_period
                       ELSE rota_queues.rate_period END,
    updated_at = now()
RETURNING name, paused, global_limit, rate_limit, rate_period, updated_at,
          pg_notify('rota_jobs', name) AS notified

-- name: queue_partitions
-- Partition keys held up by a dead letter: the dead job (the oldest, if several) and how
-- many later jobs of the key wait behind it.
SELECT d.queue, d.partition_key, min(d.id) AS dead_job_id, count(*) AS dead,
       (SELECT count(*) FROM rota_jobs AS w
        WHERE w.queue = d.queue AND w.partition_key = d.partition_key
          AND w.state IN ('scheduled', 'available', 'retryable')) AS waiting,
       min(d.finished_at) AS since
FROM rota_jobs AS d
WHERE d.state = 'discarded' AND d.partition_key IS NOT NULL
  AND (%(queue)s::text IS NULL OR d.queue = %(queue)s::text)
GROUP BY d.queue, d.partition_key
ORDER BY d.queue, d.partition_key
LIMIT %(limit)s
