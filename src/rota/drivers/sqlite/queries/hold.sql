-- name: hold_lock_queue
-- Create the queue's row if needed (BEGIN IMMEDIATE already serialises the change).
INSERT INTO rota_queues (name, paused, updated_at)
VALUES (:queue, 0, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at
RETURNING paused

-- name: hold_adopt
-- A queue paused with no hold was paused outside the holds (an older rota): an operator's.
INSERT OR IGNORE INTO rota_queue_holds (queue, source, reason, since)
SELECT q.name, 'manual', 'paused by an operator', (julianday('now') - 2440587.5) * 86400.0
FROM rota_queues AS q
WHERE q.name = :queue AND q.paused
  AND NOT EXISTS (SELECT 1 FROM rota_queue_holds AS h WHERE h.queue = q.name)

-- name: hold_put
-- Add or update one source's hold on a queue.
INSERT INTO rota_queue_holds (queue, source, reason, since, until)
VALUES (:queue, :source, :reason, (julianday('now') - 2440587.5) * 86400.0, :until)
ON CONFLICT (queue, source) DO UPDATE SET reason = excluded.reason, until = excluded.until

-- name: hold_drop
-- Remove one source's hold on a queue.
DELETE FROM rota_queue_holds WHERE queue = :queue AND source = :source RETURNING queue

-- name: hold_sync
-- The queue is paused exactly while it has a hold.
UPDATE rota_queues
SET paused = EXISTS (SELECT 1 FROM rota_queue_holds AS h WHERE h.queue = :queue),
    updated_at = (julianday('now') - 2440587.5) * 86400.0
WHERE name = :queue
RETURNING paused, NULL AS notified

-- name: hold_list
-- Holds of one queue (or of all when queue is NULL).
SELECT queue, source, reason, since, until FROM rota_queue_holds
WHERE :queue IS NULL OR queue = :queue
ORDER BY queue, source

-- name: window_put
-- Set a queue's processing windows.
INSERT INTO rota_queue_windows (queue, windows, tz, updated_at)
VALUES (:queue, :windows, :tz, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (queue) DO UPDATE SET windows = excluded.windows, tz = excluded.tz,
                                  updated_at = excluded.updated_at

-- name: window_drop
-- Forget a queue's processing windows.
DELETE FROM rota_queue_windows WHERE queue = :queue RETURNING queue

-- name: window_list
-- Every queue's processing windows.
SELECT queue, windows, tz, updated_at FROM rota_queue_windows ORDER BY queue

-- name: breaker_configure
-- Set a queue's breaker settings; a breaker already open keeps its state.
INSERT INTO rota_queue_breakers
    (queue, threshold, min_attempts, window_s, cooldown_s, changed_at, updated_at)
VALUES (:queue, :threshold, :min_attempts, :window, :cooldown,
        (julianday('now') - 2440587.5) * 86400.0, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (queue) DO UPDATE SET threshold = excluded.threshold,
    min_attempts = excluded.min_attempts, window_s = excluded.window_s,
    cooldown_s = excluded.cooldown_s, updated_at = excluded.updated_at

-- name: breaker_drop
-- Remove a queue's breaker.
DELETE FROM rota_queue_breakers WHERE queue = :queue RETURNING queue

-- name: breaker_list
-- Breakers of one queue (or all when queue is NULL).
SELECT * FROM rota_queue_breakers
WHERE :queue IS NULL OR queue = :queue
ORDER BY queue

-- name: breaker_save
-- Write a breaker's state as the leader decided it.
UPDATE rota_queue_breakers
SET state = :state, changed_at = :changed_at, trips = :trips,
    attempts = :attempts, failures = :failures,
    trial_job_id = :trial_job_id, trial_attempt = :trial_attempt,
    saved_rate = :saved_rate, saved_rate_limit = :saved_rate_limit,
    saved_rate_period = :saved_rate_period,
    updated_at = (julianday('now') - 2440587.5) * 86400.0
WHERE queue = :queue

-- name: breaker_attempts
-- Finished attempts of a queue's jobs that started at or after `since`, and how many of
-- them failed. Only jobs whose latest attempt started since then can hold such attempts;
-- finished ones are found through the finished_at index, waiting ones by state and queue,
-- so the pass never reads the queue's whole history. A completed job's last attempt may be
-- implied rather than stored (COMPLETED_ENTRY in rota.drivers.base): counted on its own.
SELECT count(*)
       + (SELECT count(*) FROM rota_jobs AS d
          WHERE d.queue = :queue AND d.attempted_at >= :since
            AND d.state = 'completed' AND d.finished_at >= :since
            AND json_extract(d.history, '$[#-1].attempt') IS NOT d.attempt) AS attempts,
       coalesce(sum(json_extract(e.value, '$.outcome') IN (SELECT value FROM json_each(:failed))),
                0) AS failures
FROM rota_jobs AS j, json_each(j.history) AS e
WHERE j.queue = :queue AND j.attempted_at >= :since
  AND ((j.state IN ('completed', 'discarded') AND j.finished_at >= :since)
       OR j.state IN ('retryable', 'available', 'scheduled', 'running'))
  AND json_extract(e.value, '$.started_at') >= :since
  AND (json_extract(e.value, '$.outcome') = 'completed'
       OR json_extract(e.value, '$.outcome') IN (SELECT value FROM json_each(:failed)))

-- name: breaker_trial
-- The first job of a queue started at or after `since` (a half-open breaker's trial).
SELECT id, attempt FROM rota_jobs
WHERE queue = :queue AND attempted_at >= :since
ORDER BY attempted_at, id
LIMIT 1
