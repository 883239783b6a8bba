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
