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
-- The leader's pass (one transaction): the counters' growth since the last pass, and the
-- jobs enqueued since (ids above its mark: one writer at a time hands ids out in commit
-- order), become this minute's throughput.
INSERT INTO rota_job_flow (minute, queue, kind, n)
SELECT CAST(((julianday('now') - 2440587.5) * 86400.0) / 60 AS INTEGER) * 60, c.queue, c.state,
       sum(c.entered - COALESCE(m.entered, 0))
FROM rota_job_counts AS c
LEFT JOIN rota_job_marks AS m ON m.queue = c.queue AND m.state = c.state AND m.worker = c.worker
WHERE c.entered > COALESCE(m.entered, 0)
GROUP BY c.queue, c.state
ON CONFLICT (minute, queue, kind) DO UPDATE SET n = n + excluded.n;
SELECT changes() AS folded;
INSERT INTO rota_job_flow (minute, queue, kind, n)
SELECT CAST(((julianday('now') - 2440587.5) * 86400.0) / 60 AS INTEGER) * 60, queue, 'enqueued',
       count(*)
FROM rota_jobs
WHERE id > COALESCE((SELECT entered FROM rota_job_marks
                     WHERE queue = '' AND state = 'enqueued' AND worker = ''), 0)
GROUP BY queue
ON CONFLICT (minute, queue, kind) DO UPDATE SET n = n + excluded.n;
SELECT changes() AS folded;
-- A pass with nothing new writes nothing (no write would wake the workers' watchers).
INSERT INTO rota_job_marks (queue, state, worker, entered)
SELECT c.queue, c.state, c.worker, c.entered FROM rota_job_counts AS c
LEFT JOIN rota_job_marks AS m ON m.queue = c.queue AND m.state = c.state AND m.worker = c.worker
WHERE m.entered IS NULL OR m.entered <> c.entered
ON CONFLICT (queue, state, worker) DO UPDATE SET entered = excluded.entered;
INSERT INTO rota_job_marks (queue, state, worker, entered)
SELECT '', 'enqueued', '', COALESCE((SELECT max(id) FROM rota_jobs), 0) WHERE true
ON CONFLICT (queue, state, worker) DO UPDATE SET entered = excluded.entered
WHERE excluded.entered > entered;

-- name: metrics_counts_prune
-- Drop throughput older than the longest chart window (7 days), and counters of workers
-- with no finished job left whose growth is already in the flow.
DELETE FROM rota_job_flow
WHERE minute < CAST((julianday('now') - 2440587.5) * 86400.0 AS INTEGER) - 8 * 86400;
SELECT changes() AS pruned;
DELETE FROM rota_job_counts
WHERE n = 0 AND worker <> ''
  AND entered = (SELECT m.entered FROM rota_job_marks AS m
                 WHERE m.queue = rota_job_counts.queue AND m.state = rota_job_counts.state
                   AND m.worker = rota_job_counts.worker);
SELECT changes() AS pruned;
DELETE FROM rota_job_marks
WHERE state <> 'enqueued' AND NOT EXISTS (SELECT 1 FROM rota_job_counts AS c
                  WHERE c.queue = rota_job_marks.queue AND c.state = rota_job_marks.state
                    AND c.worker = rota_job_marks.worker);
SELECT changes() AS pruned;

-- name: metrics_horizon
-- No xmin horizon: SQLite keeps no old row versions for other readers.
SELECT NULL AS kind, NULL AS holder, NULL AS username, NULL AS application, NULL AS client,
       NULL AS state, NULL AS since, NULL AS age_s
WHERE 0
