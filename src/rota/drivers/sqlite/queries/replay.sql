-- name: replay_insert
-- Open the audit record of a replay (its count and job ids are set by replay_finish).
INSERT INTO rota_replays (created_at, principal, reason, selection, rate)
VALUES ((julianday('now') - 2440587.5) * 86400.0, :principal, :reason, :selection, :rate)
RETURNING id

-- name: replay_finish
-- Record how many dead letters a replay put back, and which.
UPDATE rota_replays SET count = :count, job_ids = :job_ids
WHERE id = :id
RETURNING *

-- name: replay_list
-- Replay audit records, newest first.
SELECT * FROM rota_replays
WHERE :before_id IS NULL OR id < :before_id
ORDER BY id DESC LIMIT :limit
