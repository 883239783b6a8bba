-- Production hardening: progress a running job reports (ctx.progress). Written at most
-- every half second per job and fenced by the lease token; none of these columns is
-- indexed, so the writes never touch the fetch index.
ALTER TABLE rota_jobs ADD COLUMN progress REAL CHECK (progress IS NULL OR (progress >= 0 AND progress <= 1));
ALTER TABLE rota_jobs ADD COLUMN progress_message TEXT;
ALTER TABLE rota_jobs ADD COLUMN progress_at REAL;
