-- name: token_insert
-- A new API token, with an optional lifetime in seconds; a live token with the same name
-- wins (no row returned).
INSERT INTO rota_api_tokens (name, digest, role, expires_at)
VALUES (%(name)s, %(digest)s, %(role)s,
        now() + make_interval(secs => %(seconds)s::float8))
ON CONFLICT (name) DO UPDATE SET digest = EXCLUDED.digest, role = EXCLUDED.role,
    created_at = now(), revoked_at = NULL, expires_at = EXCLUDED.expires_at,
    last_used_at = NULL
WHERE rota_api_tokens.revoked_at IS NOT NULL
RETURNING name

-- name: token_find
-- One token by digest, with whether it has expired and whether its last use is worth
-- recording again (older than a minute), both by the database clock.
SELECT *, (expires_at IS NOT NULL AND expires_at <= now()) AS expired,
       (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds') AS stale
FROM rota_api_tokens WHERE digest = %(digest)s

-- name: token_list
SELECT *, (expires_at IS NOT NULL AND expires_at <= now()) AS expired, false AS stale
FROM rota_api_tokens ORDER BY name

-- name: token_revoke
UPDATE rota_api_tokens SET revoked_at = now()
WHERE name = %(name)s AND revoked_at IS NULL
RETURNING name

-- name: token_touch
-- Record a use, at most once a minute per token (a page polls the API every few seconds).
UPDATE rota_api_tokens SET last_used_at = now()
WHERE digest = %(digest)s
  AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
