-- name: token_insert
-- A new API token, with an optional lifetime in seconds; a live token with the same name
-- wins (no row returned).
INSERT INTO rota_api_tokens (name, digest, role, created_at, expires_at)
VALUES (:name, :digest, :role, (julianday('now') - 2440587.5) * 86400.0,
        (julianday('now') - 2440587.5) * 86400.0 + :seconds)
ON CONFLICT (name) DO UPDATE SET digest = excluded.digest, role = excluded.role,
    created_at = excluded.created_at, revoked_at = NULL, expires_at = excluded.expires_at,
    last_used_at = NULL
WHERE rota_api_tokens.revoked_at IS NOT NULL
RETURNING name

-- name: token_find
-- One token by digest, with whether it has expired and whether its last use is worth
-- recording again (older than a minute), both by the database clock.
SELECT *,
       (expires_at IS NOT NULL AND expires_at <= (julianday('now') - 2440587.5) * 86400.0)
           AS expired,
       (last_used_at IS NULL
        OR last_used_at < (julianday('now') - 2440587.5) * 86400.0 - 60) AS stale
FROM rota_api_tokens WHERE digest = :digest

-- name: token_list
SELECT *,
       (expires_at IS NOT NULL AND expires_at <= (julianday('now') - 2440587.5) * 86400.0)
           AS expired,
       0 AS stale
FROM rota_api_tokens ORDER BY name

-- name: token_revoke
UPDATE rota_api_tokens SET revoked_at = (julianday('now') - 2440587.5) * 86400.0
WHERE name = :name AND revoked_at IS NULL
RETURNING name

-- name: token_touch
-- Record a use, at most once a minute per token (a page polls the API every few seconds).
UPDATE rota_api_tokens SET last_used_at = (julianday('now') - 2440587.5) * 86400.0
WHERE digest = :digest
  AND (last_used_at IS NULL
       OR last_used_at < (julianday('now') - 2440587.5) * 86400.0 - 60)
