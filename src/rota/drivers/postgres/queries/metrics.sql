-- name: metrics_leaders
-- Leader rows whose lease has not expired: who runs each leader-only role now.
SELECT name, leader, elected_at, expires_at FROM rota_leaders
WHERE expires_at > now() ORDER BY name

-- name: metrics_workers
-- Workers holding live job leases, with how many jobs each runs (the lease index serves it).
SELECT worker, count(*) AS running FROM rota_jobs
WHERE state = 'running' AND lease_expires_at > now() AND worker IS NOT NULL
GROUP BY worker ORDER BY worker

-- name: metrics_counts_fold
-- Fold the changes the rota_jobs triggers appended (0019) into the counts per queue and
-- state, the flow per minute and the workers seen; rows are written in key order, so two
-- leaders folding at once wait for each other instead of deadlocking.
WITH d AS (DELETE FROM rota_job_deltas RETURNING *),
counted AS (
    INSERT INTO rota_job_counts AS c (queue, state, n)
    SELECT queue, state, sum(n) FROM d GROUP BY queue, state ORDER BY queue, state
    ON CONFLICT (queue, state) DO UPDATE SET n = c.n + excluded.n
),
flowed AS (
    INSERT INTO rota_job_flow AS f (queue, kind, minute, n)
    SELECT queue, kind, minute, sum(k) FROM (
        SELECT queue, 'enqueued' AS kind, date_trunc('minute', at) AS minute, inserted AS k
        FROM d WHERE inserted > 0
        UNION ALL
        SELECT queue, state, date_trunc('minute', at), entered FROM d
        WHERE entered > 0 AND state IN ('completed', 'discarded', 'cancelled')
    ) AS x
    GROUP BY minute, queue, kind ORDER BY minute, queue, kind
    ON CONFLICT (minute, queue, kind) DO UPDATE SET n = f.n + excluded.n
),
seen AS (
    INSERT INTO rota_workers_seen AS s (worker, queue, last_seen)
    SELECT worker, queue, max(at) FROM d WHERE worker IS NOT NULL AND entered > 0
    GROUP BY worker, queue ORDER BY worker, queue
    ON CONFLICT (worker, queue) DO UPDATE SET last_seen = GREATEST(s.last_seen, excluded.last_seen)
)
SELECT count(*) AS folded FROM d

-- name: metrics_counts_prune
-- Drop throughput older than the longest chart window (7 days), workers not seen for a
-- day and counts that went back to zero.
WITH f AS (DELETE FROM rota_job_flow WHERE minute < now() - interval '8 days' RETURNING 1),
w AS (DELETE FROM rota_workers_seen WHERE last_seen < now() - interval '1 day' RETURNING 1),
c AS (DELETE FROM rota_job_counts WHERE n = 0 RETURNING 1)
SELECT (SELECT count(*) FROM f) + (SELECT count(*) FROM w) + (SELECT count(*) FROM c) AS pruned

-- name: metrics_horizon
-- Transactions that hold back the xmin horizon (VACUUM keeps every row version newer than
-- their snapshot or transaction id), oldest first: sessions, and prepared transactions.
-- Another role's sessions show only with pg_read_all_stats (docs/operations.md).
SELECT * FROM (
    SELECT 'session' AS kind, pid::text AS holder, usename::text AS username,
           application_name::text AS application, host(client_addr) AS client,
           state::text AS state, xact_start AS since,
           EXTRACT(EPOCH FROM clock_timestamp() - xact_start)::float8 AS age_s
    FROM pg_stat_activity
    -- A snapshot (backend_xmin) or a transaction id of its own (backend_xid: it wrote)
    -- holds the horizon; a read-committed session between statements holds neither.
    -- Only this database's sessions hold back the vacuum of its tables.
    WHERE (backend_xmin IS NOT NULL OR backend_xid IS NOT NULL)
      AND datname = current_database() AND xact_start IS NOT NULL AND pid <> pg_backend_pid()
    UNION ALL
    SELECT 'prepared', gid, owner::text, NULL, NULL, 'prepared', prepared,
           EXTRACT(EPOCH FROM clock_timestamp() - prepared)::float8
    FROM pg_prepared_xacts WHERE database = current_database()
) AS h
ORDER BY since
LIMIT 5
