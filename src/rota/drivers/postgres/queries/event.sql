-- name: event_insert
-- Store an event; nothing when its idempotency key was published before.
INSERT INTO rota_events (name, version, payload, key)
VALUES (%(name)s, %(version)s, %(payload)s::jsonb, %(key)s)
ON CONFLICT (key) DO NOTHING
RETURNING *

-- name: event_get_by_key
SELECT * FROM rota_events WHERE key = %(key)s

-- name: event_get
SELECT * FROM rota_events WHERE id = %(id)s

-- name: event_list
-- Oldest first: by name, an id range and a publish-time lower bound.
SELECT * FROM rota_events
WHERE (%(name)s::text IS NULL OR name = %(name)s::text)
  AND (%(after_id)s::bigint IS NULL OR id > %(after_id)s::bigint)
  AND (%(until_id)s::bigint IS NULL OR id <= %(until_id)s::bigint)
  AND (%(since)s::timestamptz IS NULL OR published_at >= %(since)s::timestamptz)
ORDER BY id
LIMIT %(limit)s

-- name: subscription_upsert
-- Declare a subscriber; a known one keeps its created_at (it is not new).
INSERT INTO rota_subscriptions (event, task, queue, priority, max_attempts)
VALUES (%(event)s, %(task)s, %(queue)s, %(priority)s, %(max_attempts)s)
ON CONFLICT (event, task) DO UPDATE SET queue = EXCLUDED.queue,
    priority = EXCLUDED.priority, max_attempts = EXCLUDED.max_attempts

-- name: subscription_list_for
SELECT * FROM rota_subscriptions WHERE event = %(event)s ORDER BY task

-- name: subscription_list
SELECT * FROM rota_subscriptions ORDER BY event, task

-- name: subscription_delete
DELETE FROM rota_subscriptions WHERE event = %(event)s AND task = %(task)s
RETURNING task

-- name: event_prune
-- Delete up to `limit` events published longer than `age` seconds ago (their deliveries
-- are jobs of their own; replay and publish-once keys reach back this far).
DELETE FROM rota_events WHERE id IN (
    SELECT id FROM rota_events
    WHERE published_at < now() - make_interval(secs => %(age)s)
    ORDER BY published_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
RETURNING id
