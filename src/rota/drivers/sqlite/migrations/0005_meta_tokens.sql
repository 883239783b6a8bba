-- Job metadata that features attach to a job (batch index, workflow step, trace
-- context, event id): never the task's arguments, read by the worker with the job.
ALTER TABLE rota_jobs ADD COLUMN meta TEXT;

-- API tokens for the HTTP API: only a SHA-256 digest is stored; the token is shown once.
CREATE TABLE IF NOT EXISTS rota_api_tokens (
    name       TEXT PRIMARY KEY,
    digest     TEXT NOT NULL UNIQUE,
    role       TEXT NOT NULL CHECK (role IN ('viewer', 'operator', 'replayer', 'admin')),
    created_at REAL NOT NULL,
    revoked_at REAL
);
