-- API tokens get an optional lifetime and a "last used" time; the dashboard gets its own
-- browser sessions (the cookie no longer carries the API token) and single-use login
-- links. Every secret is stored as its SHA-256 digest only.
ALTER TABLE rota_api_tokens ADD COLUMN IF NOT EXISTS expires_at timestamptz;
ALTER TABLE rota_api_tokens ADD COLUMN IF NOT EXISTS last_used_at timestamptz;

-- A browser session stands for the token it was opened with (by the token's digest, so a
-- token revoked, expired or issued again under its name ends it).
CREATE TABLE IF NOT EXISTS rota_sessions (
    digest       text        PRIMARY KEY,
    token_digest text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    ended_at     timestamptz
);
CREATE INDEX IF NOT EXISTS rota_sessions_expires_idx ON rota_sessions (expires_at);

-- `rota dashboard login-url`: a short-lived link, exchanged once for a session.
CREATE TABLE IF NOT EXISTS rota_login_links (
    digest       text        PRIMARY KEY,
    token_digest text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL,
    used_at      timestamptz
);
CREATE INDEX IF NOT EXISTS rota_login_links_expires_idx ON rota_login_links (expires_at);
