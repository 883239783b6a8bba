-- name: leader_attempt_elect
-- Become (or stay) leader unless another live leader holds the row.
INSERT INTO rota_leaders (name, leader, elected_at, expires_at)
VALUES (:name, :leader, (julianday('now') - 2440587.5) * 86400.0,
        (julianday('now') - 2440587.5) * 86400.0 + :ttl)
ON CONFLICT (name) DO UPDATE
SET leader = excluded.leader,
    expires_at = excluded.expires_at,
    elected_at = CASE WHEN rota_leaders.leader = excluded.leader
                      THEN rota_leaders.elected_at ELSE excluded.elected_at END
WHERE rota_leaders.leader = excluded.leader
   OR rota_leaders.expires_at < (julianday('now') - 2440587.5) * 86400.0
RETURNING leader

-- name: leader_resign
-- Give up leadership so another worker takes over at once.
DELETE FROM rota_leaders WHERE name = :name AND leader = :leader
