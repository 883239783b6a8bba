-- name: session_insert
-- A browser session for the token with digest `token_digest`, for `seconds`.
INSERT INTO rota_sessions (digest, token_digest, created_at, expires_at)
VALUES (:digest, :token_digest, (julianday('now') - 2440587.5) * 86400.0,
        (julianday('now') - 2440587.5) * 86400.0 + :seconds)

-- name: session_find
-- The live token behind a live session: neither the session nor the token has ended,
-- expired or been revoked.
SELECT t.*, 0 AS expired,
       (t.last_used_at IS NULL
        OR t.last_used_at < (julianday('now') - 2440587.5) * 86400.0 - 60) AS stale
FROM rota_sessions s JOIN rota_api_tokens t ON t.digest = s.token_digest
WHERE s.digest = :digest AND s.ended_at IS NULL
  AND s.expires_at > (julianday('now') - 2440587.5) * 86400.0
  AND t.revoked_at IS NULL
  AND (t.expires_at IS NULL OR t.expires_at > (julianday('now') - 2440587.5) * 86400.0)

-- name: session_end
-- Sign out: the session ends at once, on the server.
UPDATE rota_sessions SET ended_at = (julianday('now') - 2440587.5) * 86400.0
WHERE digest = :digest AND ended_at IS NULL
RETURNING digest

-- name: session_prune
-- Forget sessions that ended or expired more than a day ago.
DELETE FROM rota_sessions
WHERE expires_at < (julianday('now') - 2440587.5) * 86400.0 - 86400
   OR ended_at < (julianday('now') - 2440587.5) * 86400.0 - 86400

-- name: login_link_insert
-- A single-use login link for the live token called `name`, for `seconds` (no row: no
-- such live token). The link is tied to the token's digest of now, so a token issued
-- again under the same name does not inherit it.
INSERT INTO rota_login_links (digest, token_digest, created_at, expires_at)
SELECT :digest, digest, (julianday('now') - 2440587.5) * 86400.0,
       (julianday('now') - 2440587.5) * 86400.0 + :seconds
FROM rota_api_tokens
WHERE name = :name AND revoked_at IS NULL
  AND (expires_at IS NULL OR expires_at > (julianday('now') - 2440587.5) * 86400.0)
RETURNING digest

-- name: login_link_redeem
-- Use a link once: only one caller gets its token digest back, only in time, and only
-- while its token is live (a link of a revoked token stays unused: it says why).
UPDATE rota_login_links SET used_at = (julianday('now') - 2440587.5) * 86400.0
WHERE digest = :digest AND used_at IS NULL
  AND expires_at > (julianday('now') - 2440587.5) * 86400.0
  AND EXISTS (SELECT 1 FROM rota_api_tokens t
              WHERE t.digest = rota_login_links.token_digest AND t.revoked_at IS NULL
                AND (t.expires_at IS NULL
                     OR t.expires_at > (julianday('now') - 2440587.5) * 86400.0))
RETURNING token_digest

-- name: login_link_find
-- A link and the token it stands for, with why it can no longer be used (if so).
SELECT t.name, t.role, l.used_at IS NOT NULL AS used,
       l.expires_at <= (julianday('now') - 2440587.5) * 86400.0 AS expired,
       (t.name IS NOT NULL AND t.revoked_at IS NULL
        AND (t.expires_at IS NULL
             OR t.expires_at > (julianday('now') - 2440587.5) * 86400.0)) AS token_live
FROM rota_login_links l LEFT JOIN rota_api_tokens t ON t.digest = l.token_digest
WHERE l.digest = :digest

-- name: login_link_prune
-- Forget links that expired more than a day ago.
DELETE FROM rota_login_links
WHERE expires_at < (julianday('now') - 2440587.5) * 86400.0 - 86400
