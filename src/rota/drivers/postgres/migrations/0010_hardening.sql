-- Production hardening: progress a running job reports (ctx.progress). Written at most
-- every half second per job and fenced by the lease token; none of these columns is
-- indexed, so the writes stay HOT updates and never touch the fetch index.
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS progress double precision;
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS progress_message text;
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS progress_at timestamptz;
ALTER TABLE rota_jobs DROP CONSTRAINT IF EXISTS rota_jobs_progress_check;
ALTER TABLE rota_jobs ADD CONSTRAINT rota_jobs_progress_check
    CHECK (progress IS NULL OR (progress >= 0 AND progress <= 1));
