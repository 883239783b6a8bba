-- Routing by required resources and tenants. Both job columns are nullable without a
-- default, so adding them rewrites nothing, and a job without requirements or tenant
-- is claimed exactly as before.

-- Labels a worker must advertise to claim the job (NULL: any worker), sorted.
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS requires text[];
-- Who the job is for (fair scheduling and per-tenant caps in fair queues).
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS tenant text;

-- "Which waiting jobs need resources?": only jobs with requirements are in it.
CREATE INDEX IF NOT EXISTS rota_jobs_requires_idx
    ON rota_jobs (queue, id)
    WHERE requires IS NOT NULL AND state IN ('scheduled', 'available', 'retryable');
-- A fair queue's claim: the tenants with waiting jobs, and each one's first jobs.
CREATE INDEX IF NOT EXISTS rota_jobs_tenant_wait_idx
    ON rota_jobs (queue, tenant, priority, run_at, id)
    WHERE state = 'available' AND tenant IS NOT NULL;
-- Running jobs per tenant (the fair claim counts them).
CREATE INDEX IF NOT EXISTS rota_jobs_tenant_running_idx
    ON rota_jobs (tenant) WHERE tenant IS NOT NULL AND state = 'running';

-- Workers with capabilities advertise them here, renewed while they live; a row past
-- expires_at is a worker that stopped without saying goodbye.
CREATE TABLE IF NOT EXISTS rota_workers (
    id           text        PRIMARY KEY,
    queues       text[]      NOT NULL,
    capabilities text[]      NOT NULL,
    started_at   timestamptz NOT NULL DEFAULT now(),
    seen_at      timestamptz NOT NULL DEFAULT now(),
    expires_at   timestamptz NOT NULL
);

-- A queue whose claims pick jobs round-robin by tenant and enforce tenant caps.
ALTER TABLE rota_queues ADD COLUMN IF NOT EXISTS fair boolean NOT NULL DEFAULT false;

-- Per-tenant settings: at most max_running jobs of the tenant run at once (over all
-- fair queues and workers); NULL: no cap.
CREATE TABLE IF NOT EXISTS rota_tenants (
    name        text        PRIMARY KEY,
    max_running integer     CHECK (max_running IS NULL OR max_running > 0),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
