-- name: token_insert
-- A new API token; a live token with the same name wins (no row returned).
INSERT INTO rota_api_tokens (name, digest, role, created_at)
VALUES (:name, :digest, :role, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (name) DO UPDATE SET digest = excluded.digest, role = excluded.role,
    created_at = excluded.created_at, revoked_at = NULL
WHERE rota_api_tokens.revoked_at IS NOT NULL
RETURNING name

-- name: token_find
SELECT * FROM rota_api_tokens WHERE digest = :digest

-- name: token_list
SELECT * FROM rota_api_tokens ORDER BY name

-- name: token_revoke
UPDATE rota_api_tokens SET revoked_at = (julianday('now') - 2440587.5) * 86400.0
WHERE name = :name AND revoked_at IS NULL
RETURNING name
