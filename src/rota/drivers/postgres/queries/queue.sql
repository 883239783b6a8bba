-- name: queue_counts
-- Jobs per queue and state.
SELECT queue, state, count(*) AS n FROM rota_jobs GROUP BY queue, state

-- name: queue_oldest
-- Seconds the oldest runnable job of each queue has waited.
SELECT queue, EXTRACT(EPOCH FROM now() - MIN(run_at))::float8 AS age
FROM rota_jobs WHERE state = 'available' GROUP BY queue

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
