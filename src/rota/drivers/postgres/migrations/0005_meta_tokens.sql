-- Job metadata that features attach to a job (batch index, workflow step, trace
-- context, event id): never the task's arguments, read by the worker with the job.
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS meta jsonb;

-- API tokens for the HTTP API: only a SHA-256 digest is stored; the token is shown once.
CREATE TABLE IF NOT EXISTS rota_api_tokens (
    name       text PRIMARY KEY,
    digest     text        NOT NULL UNIQUE,
    role       text        NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    revoked_at timestamptz,
    CONSTRAINT rota_api_tokens_role_check CHECK (role IN ('viewer', 'operator', 'replayer', 'admin'))
);
