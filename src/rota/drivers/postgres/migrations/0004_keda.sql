-- Scaling signals for KEDA's postgresql scaler (shared/SEMANTICS.md §3.3). SEMANTICS calls
-- the function jobs_keda_backlog; rota's objects are prefixed rota_, so it is
-- rota_keda_backlog. Each function reads only indexes (index-only scans once the table is
-- vacuumed), runs as its owner (SECURITY DEFINER) so a read-only role needs nothing but
-- EXECUTE, and pins its search_path to the schema it was created in (pg_temp last), as
-- PostgreSQL advises for such functions. EXECUTE is revoked from PUBLIC: grant it to the
-- role KEDA connects as (docs/kubernetes.md).

-- Serves the "waiting and due" part of the backlog from the index alone.
CREATE INDEX IF NOT EXISTS rota_jobs_due_queue_idx
    ON rota_jobs (queue, run_at) WHERE state IN ('scheduled', 'retryable');

-- Runnable jobs of one queue: available, or retryable (or scheduled) with run_at <= now():
-- at zero workers no stager moves those, so they must wake one. A paused queue has none
-- (its workers would only wait).
CREATE OR REPLACE FUNCTION rota_keda_backlog(queue text) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
AS $$
    SELECT CASE
        WHEN EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = $1 AND q.paused) THEN 0
        ELSE (SELECT count(*) FROM rota_jobs AS j WHERE j.queue = $1 AND j.state = 'available')
           + (SELECT count(*) FROM rota_jobs AS j
              WHERE j.queue = $1 AND j.state IN ('scheduled', 'retryable')
                AND j.run_at <= now())
    END
$$;

-- Jobs of one queue running now (their workers must not be scaled away under them).
CREATE OR REPLACE FUNCTION rota_keda_running(queue text) RETURNS bigint
LANGUAGE sql STABLE SECURITY DEFINER
AS $$
    SELECT count(*) FROM rota_jobs AS j WHERE j.queue = $1 AND j.state = 'running'
$$;

-- Seconds the oldest runnable job of one queue has waited (0 when none waits).
CREATE OR REPLACE FUNCTION rota_keda_oldest_age(queue text) RETURNS double precision
LANGUAGE sql STABLE SECURITY DEFINER
AS $$
    SELECT COALESCE(EXTRACT(EPOCH FROM now() - LEAST(
        (SELECT min(j.run_at) FROM rota_jobs AS j WHERE j.queue = $1 AND j.state = 'available'),
        (SELECT min(j.run_at) FROM rota_jobs AS j
         WHERE j.queue = $1 AND j.state IN ('scheduled', 'retryable') AND j.run_at <= now())
    ))::float8, 0.0)
$$;

DO $$
BEGIN
    EXECUTE format('ALTER FUNCTION rota_keda_backlog(text) SET search_path = %I, pg_temp',
                   current_schema());
    EXECUTE format('ALTER FUNCTION rota_keda_running(text) SET search_path = %I, pg_temp',
                   current_schema());
    EXECUTE format('ALTER FUNCTION rota_keda_oldest_age(text) SET search_path = %I, pg_temp',
                   current_schema());
END
$$;

REVOKE EXECUTE ON FUNCTION
    rota_keda_backlog(text), rota_keda_running(text), rota_keda_oldest_age(text)
FROM PUBLIC;
