-- name: token_insert
-- A new API token; a live token with the same name wins (no row returned).
INSERT INTO rota_api_tokens (name, digest, role) VALUES (%(name)s, %(digest)s, %(role)s)
ON CONFLICT (name) DO UPDATE SET digest = EXCLUDED.digest, role = EXCLUDED.role,
    created_at = now(), revoked_at = NULL
WHERE rota_api_tokens.revoked_at IS NOT NULL
RETURNING name

-- name: token_find
SELECT * FROM rota_api_tokens WHERE digest = %(digest)s

-- name: token_list
SELECT * FROM rota_api_tokens ORDER BY name

-- name: token_revoke
UPDATE rota_api_tokens SET revoked_at = now()
WHERE name = %(name)s AND revoked_at IS NULL
RETURNING name
