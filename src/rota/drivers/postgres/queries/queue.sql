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
