-- name: job_claim_fair
-- Claim from a fair queue (its limits apply as in job_claim_limited, whose room it shares):
-- each tenant with waiting jobs offers its first jobs (priority, run_at, id) up to its cap
-- (max_running - running); jobs without a tenant form one more group. The k-th job of a
-- group that has r jobs running ranks r + k, so a claim tops up the tenants with the
-- fewest running jobs first and a burst of one tenant cannot starve the others.
-- In one transaction, like job_claim_limited: the attempts that ended, the queue's lock,
-- the claim, and whether jobs are still waiting.
-- moves: available -> running
-- include: job_complete_many
SELECT 'lock' AS kind FROM rota_queues WHERE name = %(queue)s FOR UPDATE;
WITH cfg AS (
    SELECT global_limit, rate_limit, rate_period FROM rota_queues
    WHERE name = %(queue)s AND NOT paused AND fair
),
room AS (
    SELECT LEAST(
        %(limit)s::bigint,
        COALESCE(cfg.global_limit - (SELECT count(*) FROM rota_jobs
                                     WHERE state = 'running' AND queue = %(queue)s),
                 %(limit)s::bigint),
        COALESCE(cfg.rate_limit - (SELECT COALESCE(sum(s.n), 0) FROM rota_queue_starts AS s
                                   WHERE s.queue = %(queue)s
                                     AND s.started_at > statement_timestamp()
                                         - make_interval(secs => cfg.rate_period)),
                 %(limit)s::bigint)) AS n
    FROM cfg
),
tenants AS (
    -- Distinct tenants with waiting jobs: a skip scan, one index probe per tenant.
    WITH RECURSIVE t(tenant) AS (
        (SELECT tenant FROM rota_jobs
         WHERE state = 'available' AND queue = %(queue)s AND tenant IS NOT NULL
         ORDER BY tenant LIMIT 1)
        UNION ALL
        SELECT (SELECT j.tenant FROM rota_jobs AS j
                WHERE j.state = 'available' AND j.queue = %(queue)s AND j.tenant > t.tenant
                ORDER BY j.tenant LIMIT 1)
        FROM t WHERE t.tenant IS NOT NULL
    )
    SELECT tenant FROM t WHERE tenant IS NOT NULL
),
running AS MATERIALIZED (
    -- The running jobs of every tenant, counted in one pass over their partial index:
    -- a count per tenant would read the running jobs once per tenant wherever the
    -- planner, misled by old statistics, picks another index.
    SELECT tenant, count(*) AS n FROM rota_jobs
    WHERE state = 'running' AND tenant IS NOT NULL
    GROUP BY tenant
),
load AS MATERIALIZED (  -- counted once per tenant, not once per candidate
    SELECT t.tenant, COALESCE(r.n, 0) AS running, c.max_running AS cap
    FROM tenants AS t
    LEFT JOIN running AS r ON r.tenant = t.tenant
    LEFT JOIN rota_tenants AS c ON c.name = t.tenant
),
candidates AS (
    SELECT c.id, c.priority, c.run_at, l.running,
           row_number() OVER (PARTITION BY l.tenant ORDER BY c.priority, c.run_at, c.id) AS nth
    FROM load AS l
    CROSS JOIN LATERAL (
        -- The outer constant LIMIT gives the planner a row estimate (it cannot read one
        -- from the per-tenant expression) and keeps it off hash joins and JIT.
        SELECT * FROM (
        SELECT j.id, j.priority, j.run_at FROM rota_jobs AS j
        WHERE j.state = 'available' AND j.queue = %(queue)s AND j.tenant = l.tenant
          AND (j.expires_at IS NULL OR j.expires_at > statement_timestamp())
          AND (j.requires IS NULL OR j.requires <@ COALESCE(%(caps)s::text[], j.requires))
          AND (j.partition_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM rota_jobs AS b
              WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
                AND b.state IN ('scheduled', 'available', 'running', 'retryable', 'discarded')))
        ORDER BY j.priority, j.run_at, j.id
        LIMIT GREATEST(0, LEAST(%(limit)s::bigint, COALESCE(l.cap - l.running, %(limit)s::bigint)))
        ) AS first LIMIT %(limit)s
    ) AS c
    UNION ALL
    SELECT u.id, u.priority, u.run_at,
           (SELECT count(*) FROM rota_jobs AS r WHERE r.state = 'running' AND r.tenant IS NULL),
           row_number() OVER (ORDER BY u.priority, u.run_at, u.id)
    FROM (
        -- Jobs without a tenant have no index of their own (plain queues must not pay
        -- for one): they are looked for among the queue's first 1000 waiting jobs.
        SELECT j.id, j.priority, j.run_at
        FROM (SELECT * FROM rota_jobs
              WHERE state = 'available' AND queue = %(queue)s
              ORDER BY priority, run_at, id LIMIT 1000) AS j
        WHERE j.tenant IS NULL
          AND (j.expires_at IS NULL OR j.expires_at > statement_timestamp())
          AND (j.requires IS NULL OR j.requires <@ COALESCE(%(caps)s::text[], j.requires))
          AND (j.partition_key IS NULL OR NOT EXISTS (
              SELECT 1 FROM rota_jobs AS b
              WHERE b.queue = j.queue AND b.partition_key = j.partition_key AND b.id < j.id
                AND b.state IN ('scheduled', 'available', 'running', 'retryable', 'discarded')))
        ORDER BY j.priority, j.run_at, j.id
        LIMIT %(limit)s
    ) AS u
),
chosen AS (
    SELECT id FROM candidates
    ORDER BY running + nth, priority, run_at, id
    LIMIT COALESCE((SELECT GREATEST(n, 0) FROM room), 0)
),
picked AS (
    -- = ANY (ARRAY(...)): a handful of primary-key probes, whatever the estimates say.
    SELECT j.id FROM rota_jobs AS j
    WHERE j.id = ANY (ARRAY(SELECT id FROM chosen)) AND j.state = 'available'
    FOR UPDATE SKIP LOCKED
),
claimed AS (
    UPDATE rota_jobs AS j
    SET state = 'running',
        attempt = j.attempt + 1,
        attempted_at = statement_timestamp(),
        worker = %(worker)s,
        lease_token = gen_random_uuid(),
        lease_expires_at = statement_timestamp() + make_interval(secs => %(lease)s)
    -- = ANY (ARRAY(...)): primary-key probes, whatever the plan estimates the LIMIT to be
    -- (a generic plan guesses a tenth of the table and would hash-join a full scan).
    WHERE j.id = ANY (ARRAY(SELECT id FROM picked))
    RETURNING j.id, j.task, j.queue, j.args, j.priority, j.attempt, j.max_attempts, j.run_at,
              j.created_at, j.key, j.lease_token, j.lease_expires_at, j.meta, j.checkpoint,
              j.partition_key, j.expires_at, j.requires, j.tenant, j.attempted_at, j.worker
),
logged AS (
    INSERT INTO rota_queue_starts (queue, started_at, n)
    SELECT %(queue)s, statement_timestamp(), count(*) FROM claimed
    HAVING count(*) > 0 AND EXISTS (SELECT 1 FROM cfg WHERE rate_limit IS NOT NULL)
),
forgotten AS (
    DELETE FROM rota_queue_starts AS s USING cfg
    WHERE s.queue = %(queue)s
      AND s.started_at < statement_timestamp() - make_interval(secs => COALESCE(cfg.rate_period, 0))
)
SELECT 'job' AS kind, claimed.* FROM claimed;
-- include: queue_claim_status

-- name: queue_set_fair
-- Turn tenant-fair claiming of a queue on or off; workers see it on their next claim.
INSERT INTO rota_queues (name, paused, fair, updated_at)
VALUES (%(queue)s, false, %(fair)s, now())
ON CONFLICT (name) DO UPDATE SET fair = excluded.fair, updated_at = now()
RETURNING name, fair, pg_notify('rota_jobs', name) AS notified

-- name: queue_list_fair
-- Queues that claim fairly by tenant.
SELECT name FROM rota_queues WHERE fair ORDER BY name

-- name: tenant_configure
-- Set (or with NULL, clear) a tenant's cap on running jobs.
INSERT INTO rota_tenants (name, max_running, updated_at)
VALUES (%(name)s, %(max_running)s, now())
ON CONFLICT (name) DO UPDATE SET max_running = excluded.max_running, updated_at = now()

-- name: tenant_list
-- Configured tenants and tenants with running or waiting jobs, with their counts: each
-- state from its partial index, so a scrape never reads the finished jobs (#23).
WITH counts AS (
    SELECT tenant, sum(running) AS running, sum(waiting) AS waiting
    FROM (SELECT tenant, 1 AS running, 0 AS waiting FROM rota_jobs
          WHERE tenant IS NOT NULL AND state = 'running'
          UNION ALL
          SELECT tenant, 0, 1 FROM rota_jobs WHERE tenant IS NOT NULL AND state = 'available'
          UNION ALL
          SELECT tenant, 0, 1 FROM rota_jobs
          WHERE tenant IS NOT NULL AND state IN ('scheduled', 'retryable')) AS live
    WHERE %(name)s::text IS NULL OR tenant = %(name)s::text
    GROUP BY tenant
)
SELECT COALESCE(t.name, c.tenant) AS name, t.max_running,
       COALESCE(c.running, 0) AS running, COALESCE(c.waiting, 0) AS waiting
FROM rota_tenants AS t FULL JOIN counts AS c ON c.tenant = t.name
WHERE %(name)s::text IS NULL OR COALESCE(t.name, c.tenant) = %(name)s::text
ORDER BY 1
