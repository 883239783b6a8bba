-- name: replay_insert
-- Open the audit record of a replay (its count and job ids are set by replay_finish).
INSERT INTO rota_replays (principal, reason, selection, rate)
VALUES (%(principal)s, %(reason)s, %(selection)s::jsonb, %(rate)s)
RETURNING id

-- name: replay_finish
-- Record how many dead letters a replay put back, and which.
UPDATE rota_replays SET count = %(count)s, job_ids = %(job_ids)s::jsonb
WHERE id = %(id)s
RETURNING *

-- name: replay_list
-- Replay audit records, newest first.
SELECT * FROM rota_replays
WHERE %(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint
ORDER BY id DESC LIMIT %(limit)s
