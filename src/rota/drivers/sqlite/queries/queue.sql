-- name: queue_counts
-- Jobs per queue and state: the finished ones as the triggers of 0019 keep them, the
-- waiting and running ones counted from their own indexes (as many as the backlog).
SELECT queue, state, sum(n) AS n FROM rota_job_counts
WHERE (state = 'completed' OR state = 'discarded' OR state = 'cancelled') GROUP BY queue, state HAVING sum(n) <> 0
UNION ALL
SELECT queue, 'available', count(*) FROM rota_jobs WHERE state = 'available' GROUP BY queue
UNION ALL
SELECT queue, 'running', count(*) FROM rota_jobs WHERE state = 'running' GROUP BY queue
UNION ALL
SELECT queue, state, count(*) FROM rota_jobs WHERE (state = 'scheduled' OR state = 'retryable')
GROUP BY queue, state

-- name: queue_oldest
-- Seconds the oldest runnable job of each queue has waited. The claim index (queue,
-- priority, run_at, id) holds each (queue, priority)'s oldest job first: hop from one
-- such head to the next (the next priority of the queue, else the next queue: each one
-- index seek) instead of reading the whole backlog (105 ms beside 1M waiting jobs, on
-- every overview poll and scrape). A row-value comparison would seek on the queue alone.
WITH RECURSIVE heads(queue, priority, run_at) AS (
    SELECT * FROM (SELECT queue, priority, run_at FROM rota_jobs WHERE state = 'available'
                   ORDER BY queue, priority, run_at, id LIMIT 1)
    UNION ALL
    SELECT j.queue, j.priority, j.run_at
    FROM heads AS h
    JOIN rota_jobs AS j ON j.id = COALESCE(
        (SELECT n.id FROM rota_jobs AS n
         WHERE n.state = 'available' AND n.queue = h.queue AND n.priority > h.priority
         ORDER BY n.priority, n.run_at, n.id LIMIT 1),
        (SELECT n.id FROM rota_jobs AS n
         WHERE n.state = 'available' AND n.queue > h.queue
         ORDER BY n.queue, n.priority, n.run_at, n.id LIMIT 1))
)
SELECT queue, (julianday('now') - 2440587.5) * 86400.0 - MIN(run_at) AS age
FROM heads GROUP BY queue

-- name: queue_settings
-- Stored queue settings.
SELECT name, paused FROM rota_queues

-- name: queue_set_paused
-- Pause or resume a queue; it survives restarts.
INSERT INTO rota_queues (name, paused, updated_at)
VALUES (:name, :paused, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at
RETURNING name

-- name: queue_backlog
-- One queue's scaling signals: the same counts as PostgreSQL's rota_keda_* functions.
WITH n AS (SELECT (julianday('now') - 2440587.5) * 86400.0 AS now)
SELECT
    CASE WHEN EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = :queue AND q.paused) THEN 0
         ELSE (SELECT count(*) FROM rota_jobs WHERE queue = :queue AND state = 'available')
            + (SELECT count(*) FROM rota_jobs, n
               WHERE queue = :queue AND (state = 'scheduled' OR state = 'retryable') AND run_at <= n.now)
    END AS backlog,
    (SELECT count(*) FROM rota_jobs WHERE queue = :queue AND state = 'running') AS running,
    COALESCE(n.now - (SELECT min(run_at) FROM rota_jobs
                      WHERE queue = :queue
                        AND (state = 'available'
                             OR ((state = 'scheduled' OR state = 'retryable') AND run_at <= n.now))),
             0.0) AS oldest_age_s
FROM n

-- name: queue_durations
-- How many jobs of one queue completed in the last `window` seconds, and their mean run time.
SELECT count(*) AS samples, avg(finished_at - attempted_at) AS mean_s
FROM rota_jobs
WHERE state = 'completed' AND queue = :queue
  AND finished_at >= (julianday('now') - 2440587.5) * 86400.0 - :window

-- name: queue_keda_backlog
-- A queue's runnable jobs as one number (KEDA reads PostgreSQL only; kept for parity).
SELECT CASE WHEN EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = :queue AND q.paused)
            THEN 0
            ELSE (SELECT count(*) FROM rota_jobs
                  WHERE queue = :queue
                    AND (state = 'available'
                         OR ((state = 'scheduled' OR state = 'retryable')
                             AND run_at <= (julianday('now') - 2440587.5) * 86400.0)))
       END

-- name: queue_keda_demand
-- A queue's runnable plus running jobs as one number (KEDA reads PostgreSQL only).
SELECT CASE WHEN EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = :queue AND q.paused)
            THEN 0
            ELSE (SELECT count(*) FROM rota_jobs
                  WHERE queue = :queue
                    AND (state = 'available'
                         OR ((state = 'scheduled' OR state = 'retryable')
                             AND run_at <= (julianday('now') - 2440587.5) * 86400.0)))
       END
       + (SELECT count(*) FROM rota_jobs WHERE queue = :queue AND state = 'running')

-- name: queue_controls_list
-- Stored controls of one queue (or all when name is NULL).
SELECT name, paused, global_limit, rate_limit, rate_period, updated_at FROM rota_queues
WHERE :name IS NULL OR name = :name
ORDER BY name

-- name: queue_configure
-- Set or clear a queue's global limit and rate limit (the flags say which to change);
-- workers read them on their next claim.
INSERT INTO rota_queues (name, paused, global_limit, rate_limit, rate_period, updated_at)
VALUES (:name, 0, :global_limit, :rate_limit, :rate_period,
        (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (name) DO UPDATE SET
    global_limit = CASE WHEN :set_global THEN excluded.global_limit
                        ELSE rota_queues.global_limit END,
    rate_limit = CASE WHEN :set_rate THEN excluded.rate_limit ELSE rota_queues.rate_limit END,
    rate_period = CASE WHEN :set_rate THEN excluded.rate_period
                       ELSE rota_queues.rate_period END,
    updated_at = excluded.updated_at
RETURNING name, paused, global_limit, rate_limit, rate_period, updated_at, NULL AS notified

-- name: queue_partitions
-- Partition keys held up by a dead letter: the dead job (the oldest, if several) and how
-- many later jobs of the key wait behind it.
SELECT d.queue, d.partition_key, min(d.id) AS dead_job_id, count(*) AS dead,
       (SELECT count(*) FROM rota_jobs AS w
        WHERE w.queue = d.queue AND w.partition_key = d.partition_key
          AND (w.state = 'scheduled' OR w.state = 'available' OR w.state = 'retryable')) AS waiting,
       min(d.finished_at) AS since
FROM rota_jobs AS d
WHERE d.state = 'discarded' AND d.partition_key IS NOT NULL
  AND (:queue IS NULL OR d.queue = :queue)
GROUP BY d.queue, d.partition_key
ORDER BY d.queue, d.partition_key
LIMIT :limit
