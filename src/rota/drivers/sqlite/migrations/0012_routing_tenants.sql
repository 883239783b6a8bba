-- Routing by required resources and tenants (see the PostgreSQL migration). `requires`
-- is a sorted JSON array of labels (NULL: any worker), the form rota db copy turns into
-- a PostgreSQL text[].
ALTER TABLE rota_jobs ADD COLUMN requires TEXT;
ALTER TABLE rota_jobs ADD COLUMN tenant TEXT;

CREATE INDEX IF NOT EXISTS rota_jobs_requires_idx
    ON rota_jobs (queue, id)
    WHERE requires IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
CREATE INDEX IF NOT EXISTS rota_jobs_tenant_wait_idx
    ON rota_jobs (queue, tenant, priority, run_at, id)
    WHERE state = 'available' AND tenant IS NOT NULL;
CREATE INDEX IF NOT EXISTS rota_jobs_tenant_running_idx
    ON rota_jobs (tenant) WHERE tenant IS NOT NULL AND state = 'running';

CREATE TABLE IF NOT EXISTS rota_workers (
    id           TEXT PRIMARY KEY,
    queues       TEXT NOT NULL,
    capabilities TEXT NOT NULL,
    started_at   REAL NOT NULL,
    seen_at      REAL NOT NULL,
    expires_at   REAL NOT NULL
);

ALTER TABLE rota_queues ADD COLUMN fair INTEGER NOT NULL DEFAULT 0;

CREATE TABLE IF NOT EXISTS rota_tenants (
    name        TEXT PRIMARY KEY,
    max_running INTEGER CHECK (max_running IS NULL OR max_running > 0),
    updated_at  REAL NOT NULL
);
