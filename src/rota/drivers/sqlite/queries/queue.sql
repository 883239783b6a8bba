-- name: queue_counts
-- Jobs per queue and state.
SELECT queue, state, count(*) AS n FROM rota_jobs GROUP BY queue, state

-- name: queue_oldest
-- Seconds the oldest runnable job of each queue has waited.
SELECT queue, (julianday('now') - 2440587.5) * 86400.0 - MIN(run_at) AS age
FROM rota_jobs WHERE state = 'available' GROUP BY queue

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
               WHERE queue = :queue AND state IN ('scheduled', 'retryable') AND run_at <= n.now)
    END AS backlog,
    (SELECT count(*) FROM rota_jobs WHERE queue = :queue AND state = 'running') AS running,
    COALESCE(n.now - (SELECT min(run_at) FROM rota_jobs
                      WHERE queue = :queue
                        AND (state = 'available'
                             OR (state IN ('scheduled', 'retryable') AND run_at <= n.now))),
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
                         OR (state IN ('scheduled', 'retryable')
                             AND run_at <= (julianday('now') - 2440587.5) * 86400.0)))
       END

-- name: queue_keda_demand
-- A queue's runnable plus running jobs as one number (KEDA reads PostgreSQL only).
SELECT CASE WHEN EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = :queue AND q.paused)
            THEN 0
            ELSE (SELECT count(*) FROM rota_jobs
                  WHERE queue = :queue
                    AND (state = 'available'
                         OR (state IN ('scheduled', 'retryable')
                             AND run_at <= (julianday('now') - 2440587.5) * 86400.0)))
       END
       + (SELECT count(*) FROM rota_jobs WHERE queue = :queue AND state = 'running')
