-- name: inbox_record
-- Remember an outside message id; no row returned means it was seen before.
INSERT INTO rota_inbox (source, message_id) VALUES (%(source)s, %(message_id)s)
ON CONFLICT (source, message_id) DO NOTHING
RETURNING message_id

-- name: inbox_prune
-- Forget message ids older than the inbox retention.
DELETE FROM rota_inbox WHERE (source, message_id) IN (
    SELECT source, message_id FROM rota_inbox
    WHERE received_at < now() - make_interval(secs => %(age)s)
    LIMIT %(limit)s
)
