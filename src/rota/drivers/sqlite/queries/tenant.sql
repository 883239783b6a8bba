-- name: job_claim_fair
-- Claim from a fair queue under the write lock (see the PostgreSQL statement): each
-- tenant's waiting jobs are numbered (priority, run_at, id), capped at max_running -
-- running; the k-th job of a tenant with r running ranks r + k; jobs without a tenant
-- form one more group. The numbering reads the queue's whole backlog on SQLite. In one
-- write transaction, like job_claim_limited: the attempts that ended, the claim, the rate
-- window's starts, and how the queue is claimed now.
-- moves: available -> running
-- include: job_complete_many
UPDATE rota_jobs
SET state = 'running',
    attempt = attempt + 1,
    attempted_at = (julianday('now') - 2440587.5) * 86400.0,
    worker = :worker,
    lease_token = lower(hex(randomblob(16))),
    lease_expires_at = (julianday('now') - 2440587.5) * 86400.0 + :lease
WHERE id IN (
    SELECT c.id
    FROM (
        SELECT j.id, j.priority, j.run_at, j.tenant,
               row_number() OVER (PARTITION BY j.tenant
                                  ORDER BY j.priority, j.run_at, j.id) AS nth
        FROM rota_jobs AS j
        WHERE state = 'available' AND queue = :queue
          AND (j.expires_at IS NULL OR j.expires_at > (julianday('now') - 2440587.5) * 86400.0)
          AND (j.requires IS NULL OR :caps IS NULL OR NOT EXISTS (
              SELECT 1 FROM json_each(j.requires) AS r
              WHERE r.value NOT IN (SELECT value FROM json_each(:caps))))
          AND (j.partition_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM rota_jobs AS b
              WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
                AND (b.state = 'scheduled' OR b.state = 'available' OR b.state = 'running' OR b.state = 'retryable' OR b.state = 'discarded')))
    ) AS c
    LEFT JOIN (SELECT tenant, count(*) AS n FROM rota_jobs WHERE state = 'running'
               GROUP BY tenant) AS r ON r.tenant IS c.tenant
    LEFT JOIN rota_tenants AS t ON t.name = c.tenant
    WHERE t.max_running IS NULL OR c.nth <= t.max_running - COALESCE(r.n, 0)
    ORDER BY COALESCE(r.n, 0) + c.nth, c.priority, c.run_at, c.id
    LIMIT COALESCE((
        SELECT MAX(0, MIN(
            :limit,
            COALESCE(q.global_limit - (SELECT count(*) FROM rota_jobs
                                       WHERE state = 'running' AND queue = :queue), :limit),
            COALESCE(q.rate_limit - (SELECT COALESCE(sum(s.n), 0) FROM rota_queue_starts AS s
                                     WHERE s.queue = :queue
                                       AND s.started_at > (julianday('now') - 2440587.5) * 86400.0
                                                          - q.rate_period), :limit)))
        FROM rota_queues AS q WHERE q.name = :queue AND NOT q.paused AND q.fair
    ), 0)
)
RETURNING 'job' AS kind, id, task, queue, args, priority, attempt, max_attempts, run_at,
          created_at, key, lease_token, lease_expires_at, meta, checkpoint, partition_key,
          expires_at, requires, tenant, attempted_at, worker;
INSERT INTO rota_queue_starts (queue, started_at, n)
SELECT :queue, (julianday('now') - 2440587.5) * 86400.0, changes()
WHERE changes() > 0
  AND EXISTS (SELECT 1 FROM rota_queues WHERE name = :queue AND rate_limit IS NOT NULL);
DELETE FROM rota_queue_starts
WHERE queue = :queue
  AND started_at < (julianday('now') - 2440587.5) * 86400.0 - COALESCE((SELECT rate_period FROM rota_queues WHERE name = :queue), 0);
-- include: queue_claim_status

-- name: queue_set_fair
-- Turn tenant-fair claiming of a queue on or off; workers see it on their next claim.
INSERT INTO rota_queues (name, paused, fair, updated_at)
VALUES (:queue, 0, :fair, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (name) DO UPDATE
SET fair = excluded.fair, updated_at = excluded.updated_at
RETURNING name, fair

-- name: queue_list_fair
-- Queues that claim fairly by tenant.
SELECT name FROM rota_queues WHERE fair ORDER BY name

-- name: tenant_configure
-- Set (or with NULL, clear) a tenant's cap on running jobs.
INSERT INTO rota_tenants (name, max_running, updated_at)
VALUES (:name, :max_running, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (name) DO UPDATE
SET max_running = excluded.max_running, updated_at = excluded.updated_at

-- name: tenant_list
-- Configured tenants and tenants with running or waiting jobs, with their counts: each
-- state from its partial index (the terms match the indexes' own), so a scrape never
-- reads the finished jobs (#23).
WITH live AS (
    SELECT tenant, 1 AS running, 0 AS waiting FROM rota_jobs
    WHERE tenant IS NOT NULL AND state = 'running'
    UNION ALL
    SELECT tenant, 0, 1 FROM rota_jobs WHERE state = 'available' AND tenant IS NOT NULL
    UNION ALL
    SELECT tenant, 0, 1 FROM rota_jobs
    WHERE (state = 'scheduled' OR state = 'retryable') AND tenant IS NOT NULL
),
counts AS (
    SELECT tenant, sum(running) AS running, sum(waiting) AS waiting FROM live
    WHERE :name IS NULL OR tenant = :name
    GROUP BY tenant
),
names AS (
    SELECT name FROM rota_tenants WHERE :name IS NULL OR name = :name
    UNION
    SELECT tenant FROM counts
)
SELECT n.name, t.max_running, COALESCE(c.running, 0) AS running,
       COALESCE(c.waiting, 0) AS waiting
FROM names AS n
LEFT JOIN rota_tenants AS t ON t.name = n.name
LEFT JOIN counts AS c ON c.tenant = n.name
ORDER BY n.name
