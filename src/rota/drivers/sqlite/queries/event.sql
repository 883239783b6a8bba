-- name: event_insert
-- Store an event; nothing when its idempotency key was published before.
INSERT INTO rota_events (name, version, payload, key, published_at)
VALUES (:name, :version, :payload, :key, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (key) DO NOTHING
RETURNING *

-- name: event_get_by_key
SELECT * FROM rota_events WHERE key = :key

-- name: event_get
SELECT * FROM rota_events WHERE id = :id

-- name: event_list
-- Oldest first: by name, an id range and a publish-time lower bound. Half a microsecond of
-- slack: a time read back from a REAL (a datetime, in whole microseconds) must still
-- match the event it came from.
SELECT * FROM rota_events
WHERE (:name IS NULL OR name = :name)
  AND (:after_id IS NULL OR id > :after_id)
  AND (:until_id IS NULL OR id <= :until_id)
  AND (:since IS NULL OR published_at >= :since - 5e-7)
ORDER BY id
LIMIT :limit

-- name: subscription_upsert
-- Declare a subscriber; a known one keeps its created_at (it is not new).
INSERT INTO rota_subscriptions (event, task, queue, priority, max_attempts, created_at)
VALUES (:event, :task, :queue, :priority, :max_attempts, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (event, task) DO UPDATE SET queue = excluded.queue,
    priority = excluded.priority, max_attempts = excluded.max_attempts

-- name: subscription_list_for
SELECT * FROM rota_subscriptions WHERE event = :event ORDER BY task

-- name: subscription_list
SELECT * FROM rota_subscriptions ORDER BY event, task

-- name: subscription_delete
DELETE FROM rota_subscriptions WHERE event = :event AND task = :task
RETURNING task

-- name: event_prune
-- Delete up to `limit` events published longer than `age` seconds ago (their deliveries
-- are jobs of their own; replay and publish-once keys reach back this far).
DELETE FROM rota_events WHERE id IN (
    SELECT id FROM rota_events
    WHERE published_at < (julianday('now') - 2440587.5) * 86400.0 - :age
    ORDER BY published_at
    LIMIT :limit
)
RETURNING id
