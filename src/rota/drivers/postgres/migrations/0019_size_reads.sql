-- Reads that cost what they show (#23). The dashboard, the HTTP API and every /metrics
-- scrape count jobs per queue and state, draw throughput per minute and list the workers
-- seen lately; done over rota_jobs, each read grew with the finished history (a GROUP BY
-- over every row). Now they read small tables kept by the database itself:
--   rota_job_deltas   what each statement on rota_jobs changed, appended by statement
--                     triggers (insert-only, so writers never wait on each other);
--   rota_job_counts   jobs per queue and state, folded from the deltas by the leader;
--   rota_job_flow     jobs enqueued and finished per queue and minute (kept 8 days);
--   rota_workers_seen the last time each worker started a job of each queue.
-- A read adds the deltas not folded yet, so it is exact whether or not a leader runs.
CREATE TABLE IF NOT EXISTS rota_job_deltas (
    queue    text        NOT NULL,
    state    text        NOT NULL,
    worker   text,                       -- set on jobs entering 'running'
    at       timestamptz NOT NULL DEFAULT now(),
    n        bigint      NOT NULL,       -- net change of the (queue, state) count
    entered  bigint      NOT NULL,       -- jobs that entered the state
    inserted bigint      NOT NULL DEFAULT 0  -- jobs enqueued (INSERT)
);
ALTER TABLE rota_job_deltas SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000);

CREATE TABLE IF NOT EXISTS rota_job_counts (
    queue text   NOT NULL,
    state text   NOT NULL,
    n     bigint NOT NULL,
    PRIMARY KEY (queue, state)
);

CREATE TABLE IF NOT EXISTS rota_job_flow (
    queue  text        NOT NULL,
    kind   text        NOT NULL,  -- enqueued, completed, discarded, cancelled
    minute timestamptz NOT NULL,
    n      bigint      NOT NULL,
    PRIMARY KEY (minute, queue, kind)
);

CREATE TABLE IF NOT EXISTS rota_workers_seen (
    worker    text        NOT NULL,
    queue     text        NOT NULL,
    last_seen timestamptz NOT NULL,
    PRIMARY KEY (worker, queue)
);
CREATE INDEX IF NOT EXISTS rota_workers_seen_last_idx ON rota_workers_seen (last_seen);

-- One trigger run per statement, not per row: a claim of 100 jobs appends one or two
-- delta rows (the net change per queue and state; a lease renewal nets to none). SECURITY
-- DEFINER: a role that may write rota_jobs (enqueue, replay) needs no grant on the deltas.
CREATE OR REPLACE FUNCTION rota_jobs_counted_insert() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO rota_job_deltas (queue, state, worker, n, entered, inserted)
    SELECT queue, state, CASE WHEN state = 'running' THEN worker END, count(*), count(*), count(*)
    FROM new_rows GROUP BY 1, 2, 3;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION rota_jobs_counted_update() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO rota_job_deltas (queue, state, worker, n, entered)
    SELECT queue, state, worker, sum(d), GREATEST(sum(d), 0)
    FROM (SELECT queue, state, CASE WHEN state = 'running' THEN worker END AS worker, 1 AS d
          FROM new_rows
          UNION ALL
          SELECT queue, state, CASE WHEN state = 'running' THEN worker END, -1 FROM old_rows) AS c
    GROUP BY 1, 2, 3
    HAVING sum(d) <> 0;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION rota_jobs_counted_delete() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    INSERT INTO rota_job_deltas (queue, state, n, entered)
    SELECT queue, state, -count(*), 0 FROM old_rows GROUP BY 1, 2;
    RETURN NULL;
END $$;

CREATE OR REPLACE FUNCTION rota_jobs_counted_truncate() RETURNS trigger
LANGUAGE plpgsql SECURITY DEFINER AS $$
BEGIN
    DELETE FROM rota_job_deltas;
    DELETE FROM rota_job_counts;
    RETURN NULL;
END $$;

-- A definer's function runs with a fixed search path: the schema rota was migrated into.
DO $$
DECLARE f text;
BEGIN
    FOREACH f IN ARRAY ARRAY['rota_jobs_counted_insert', 'rota_jobs_counted_update',
                             'rota_jobs_counted_delete', 'rota_jobs_counted_truncate'] LOOP
        EXECUTE format('ALTER FUNCTION %I() SET search_path = %I, pg_temp', f, current_schema());
        EXECUTE format('REVOKE ALL ON FUNCTION %I() FROM PUBLIC', f);
    END LOOP;
END $$;

-- The triggers and the first count go in one transaction, with writers held off between
-- them, so no change is counted twice or missed.
LOCK TABLE rota_jobs IN SHARE ROW EXCLUSIVE MODE;
DROP TRIGGER IF EXISTS rota_jobs_counted_insert ON rota_jobs;
DROP TRIGGER IF EXISTS rota_jobs_counted_update ON rota_jobs;
DROP TRIGGER IF EXISTS rota_jobs_counted_delete ON rota_jobs;
DROP TRIGGER IF EXISTS rota_jobs_counted_truncate ON rota_jobs;
CREATE TRIGGER rota_jobs_counted_insert AFTER INSERT ON rota_jobs
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION rota_jobs_counted_insert();
CREATE TRIGGER rota_jobs_counted_update AFTER UPDATE ON rota_jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION rota_jobs_counted_update();
CREATE TRIGGER rota_jobs_counted_delete AFTER DELETE ON rota_jobs
    REFERENCING OLD TABLE AS old_rows FOR EACH STATEMENT EXECUTE FUNCTION rota_jobs_counted_delete();
CREATE TRIGGER rota_jobs_counted_truncate AFTER TRUNCATE ON rota_jobs
    FOR EACH STATEMENT EXECUTE FUNCTION rota_jobs_counted_truncate();

DELETE FROM rota_job_deltas;
DELETE FROM rota_job_counts;
INSERT INTO rota_job_counts (queue, state, n)
SELECT queue, state, count(*) FROM rota_jobs GROUP BY queue, state;
-- The last day of throughput and of workers, so the charts do not start empty.
INSERT INTO rota_job_flow (queue, kind, minute, n)
SELECT queue, 'enqueued', date_trunc('minute', created_at), count(*) FROM rota_jobs
WHERE created_at >= now() - interval '1 day' GROUP BY 1, 2, 3
UNION ALL
SELECT queue, state, date_trunc('minute', finished_at), count(*) FROM rota_jobs
WHERE state IN ('completed', 'discarded', 'cancelled') AND finished_at >= now() - interval '1 day'
GROUP BY 1, 2, 3
ON CONFLICT (minute, queue, kind) DO UPDATE SET n = excluded.n;
INSERT INTO rota_workers_seen (worker, queue, last_seen)
SELECT worker, queue, max(attempted_at) FROM rota_jobs
WHERE worker IS NOT NULL AND attempted_at >= now() - interval '1 day'
GROUP BY worker, queue
ON CONFLICT (worker, queue) DO UPDATE SET last_seen = excluded.last_seen;

-- Dead letters and cancelled jobs newest first (the dead-letter page, the overview's
-- failures, a jobs listing by state): rare states, which a walk down the primary key
-- would look for among millions of completed jobs. Only jobs entering or leaving these
-- states write this index.
CREATE INDEX IF NOT EXISTS rota_jobs_failed_id_idx
    ON rota_jobs (state, id) WHERE state IN ('discarded', 'cancelled');
-- Search by idempotency key, whatever the task and whether the key is still held: only
-- jobs enqueued with a key write this index.
CREATE INDEX IF NOT EXISTS rota_jobs_key_search_idx ON rota_jobs (key) WHERE key IS NOT NULL;
