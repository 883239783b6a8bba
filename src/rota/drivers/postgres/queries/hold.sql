-- name: hold_lock_queue
-- Create or lock a queue's row first: changes of its holds take turns on it.
INSERT INTO rota_queues (name, paused, updated_at) VALUES (%(queue)s, false, now())
ON CONFLICT (name) DO UPDATE SET updated_at = now()
RETURNING paused

-- name: hold_adopt
-- A queue paused with no hold was paused outside the holds (an older rota): an operator's.
INSERT INTO rota_queue_holds (queue, source, reason)
SELECT q.name, 'manual', 'paused by an operator' FROM rota_queues AS q
WHERE q.name = %(queue)s AND q.paused
  AND NOT EXISTS (SELECT 1 FROM rota_queue_holds AS h WHERE h.queue = q.name)
ON CONFLICT DO NOTHING

-- name: hold_put
-- Add or update one source's hold on a queue.
INSERT INTO rota_queue_holds (queue, source, reason, since, until)
VALUES (%(queue)s, %(source)s, %(reason)s, now(), %(until)s)
ON CONFLICT (queue, source) DO UPDATE SET reason = excluded.reason, until = excluded.until

-- name: hold_drop
-- Remove one source's hold on a queue.
DELETE FROM rota_queue_holds WHERE queue = %(queue)s AND source = %(source)s RETURNING queue

-- name: hold_sync
-- The queue is paused exactly while it has a hold; wake the workers either way.
UPDATE rota_queues
SET paused = EXISTS (SELECT 1 FROM rota_queue_holds AS h WHERE h.queue = %(queue)s),
    updated_at = now()
WHERE name = %(queue)s
RETURNING paused, pg_notify('rota_jobs', name) AS notified

-- name: hold_list
-- Holds of one queue (or of all when queue is NULL).
SELECT queue, source, reason, since, until FROM rota_queue_holds
WHERE %(queue)s::text IS NULL OR queue = %(queue)s::text
ORDER BY queue, source

-- name: window_put
-- Set a queue's processing windows.
INSERT INTO rota_queue_windows (queue, windows, tz, updated_at)
VALUES (%(queue)s, %(windows)s::jsonb, %(tz)s, now())
ON CONFLICT (queue) DO UPDATE SET windows = excluded.windows, tz = excluded.tz,
                                  updated_at = now()

-- name: window_drop
-- Forget a queue's processing windows.
DELETE FROM rota_queue_windows WHERE queue = %(queue)s RETURNING queue

-- name: window_list
-- Every queue's processing windows.
SELECT queue, windows::text AS windows, tz, updated_at FROM rota_queue_windows ORDER BY queue

-- name: breaker_configure
-- Set a queue's breaker settings; a breaker already open keeps its state.
INSERT INTO rota_queue_breakers (queue, threshold, min_attempts, window_s, cooldown_s)
VALUES (%(queue)s, %(threshold)s, %(min_attempts)s, %(window)s, %(cooldown)s)
ON CONFLICT (queue) DO UPDATE SET threshold = excluded.threshold,
    min_attempts = excluded.min_attempts, window_s = excluded.window_s,
    cooldown_s = excluded.cooldown_s, updated_at = now()

-- name: breaker_drop
-- Remove a queue's breaker.
DELETE FROM rota_queue_breakers WHERE queue = %(queue)s RETURNING queue

-- name: breaker_list
-- Breakers of one queue (or all when queue is NULL).
SELECT * FROM rota_queue_breakers
WHERE %(queue)s::text IS NULL OR queue = %(queue)s::text
ORDER BY queue

-- name: breaker_save
-- Write a breaker's state as the leader decided it.
UPDATE rota_queue_breakers
SET state = %(state)s, changed_at = %(changed_at)s, trips = %(trips)s,
    attempts = %(attempts)s, failures = %(failures)s,
    trial_job_id = %(trial_job_id)s, trial_attempt = %(trial_attempt)s,
    saved_rate = %(saved_rate)s, saved_rate_limit = %(saved_rate_limit)s,
    saved_rate_period = %(saved_rate_period)s, updated_at = now()
WHERE queue = %(queue)s

-- name: breaker_attempts
-- Finished attempts of a queue's jobs that started at or after `since`, and how many of
-- them failed. Only jobs whose latest attempt started since then can hold such attempts;
-- finished ones are found through the finished_at index, waiting ones by state and queue,
-- so the pass never reads the queue's whole history. A completed job's last attempt may be
-- implied rather than stored (COMPLETED_ENTRY in rota.drivers.base): counted on its own.
SELECT count(*) FILTER (WHERE e->>'outcome' = 'completed'
                          OR e->>'outcome' = ANY(%(failed)s::text[]))
       + (SELECT count(*) FROM rota_jobs AS d
          WHERE d.queue = %(queue)s AND d.attempted_at >= %(since)s
            AND d.state = 'completed' AND d.finished_at >= %(since)s
            AND (d.history -> -1 ->> 'attempt')::int IS DISTINCT FROM d.attempt) AS attempts,
       count(*) FILTER (WHERE e->>'outcome' = ANY(%(failed)s::text[])) AS failures
FROM rota_jobs AS j, jsonb_array_elements(j.history) AS e
WHERE j.queue = %(queue)s AND j.attempted_at >= %(since)s
  AND ((j.state IN ('completed', 'discarded') AND j.finished_at >= %(since)s)
       OR j.state IN ('retryable', 'available', 'scheduled', 'running'))
  AND (e->>'started_at')::timestamptz >= %(since)s

-- name: breaker_trial
-- The first job of a queue started at or after `since` (a half-open breaker's trial).
SELECT id, attempt FROM rota_jobs
WHERE queue = %(queue)s AND attempted_at >= %(since)s
ORDER BY attempted_at, id
LIMIT 1
