-- name: inbox_record
-- Remember an outside message id; no row returned means it was seen before.
INSERT INTO rota_inbox (source, message_id, received_at)
VALUES (:source, :message_id, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (source, message_id) DO NOTHING
RETURNING message_id

-- name: inbox_prune
-- Forget message ids older than the inbox retention.
DELETE FROM rota_inbox WHERE rowid IN (
    SELECT rowid FROM rota_inbox
    WHERE received_at < (julianday('now') - 2440587.5) * 86400.0 - :age
    LIMIT :limit
)
