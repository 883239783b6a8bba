-- name: metrics_leaders
-- Leader rows whose lease has not expired: who runs each leader-only role now.
SELECT name, leader, elected_at, expires_at FROM rota_leaders
WHERE expires_at > (julianday('now') - 2440587.5) * 86400.0 ORDER BY name

-- name: metrics_workers
-- Workers holding live job leases, with how many jobs each runs (the lease index serves it).
SELECT worker, count(*) AS running FROM rota_jobs
WHERE state = 'running' AND lease_expires_at > (julianday('now') - 2440587.5) * 86400.0
  AND worker IS NOT NULL
GROUP BY worker ORDER BY worker

-- name: metrics_counts_fold
-- Nothing to fold: SQLite's triggers (0019) update the counts in place.
SELECT 0 AS folded

-- name: metrics_counts_prune
-- Drop throughput older than the longest chart window (7 days), workers not seen for a
-- day and counts that went back to zero.
DELETE FROM rota_job_flow WHERE minute < (julianday('now') - 2440587.5) * 86400.0 - 8 * 86400;
SELECT changes() AS pruned;
DELETE FROM rota_workers_seen WHERE last_seen < (julianday('now') - 2440587.5) * 86400.0 - 86400;
SELECT changes() AS pruned;
DELETE FROM rota_job_counts WHERE n = 0;
SELECT changes() AS pruned;

-- name: metrics_horizon
-- No xmin horizon: SQLite keeps no old row versions for other readers.
SELECT NULL AS kind, NULL AS holder, NULL AS username, NULL AS application, NULL AS client,
       NULL AS state, NULL AS since, NULL AS age_s
WHERE 0
