-- KEDA's queries planned for the queue they ask about (#23). As SQL functions they ran on
-- a plan made without the queue's name, which counted the due jobs of one queue by reading
-- the due jobs of every queue through rota_jobs_due_idx and filtering them by queue (19,000
-- rows read for none counted in the test beside another queue's backlog). PL/pgSQL's
-- EXECUTE plans each call with the name known, so the per-queue indexes serve them. The
-- signatures, SECURITY DEFINER and the grants stay as they were.

CREATE OR REPLACE FUNCTION rota_keda_backlog(queue text) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
AS $$
DECLARE
    n bigint;
BEGIN
    IF EXISTS (SELECT 1 FROM rota_queues AS q WHERE q.name = $1 AND q.paused) THEN
        RETURN 0;
    END IF;
    EXECUTE 'SELECT (SELECT count(*) FROM rota_jobs AS j
                     WHERE j.queue = $1 AND j.state = ''available'')
                  + (SELECT count(*) FROM rota_jobs AS j
                     WHERE j.queue = $1 AND j.state IN (''scheduled'', ''retryable'')
                       AND j.run_at <= now())'
        INTO n USING $1;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION rota_keda_running(queue text) RETURNS bigint
LANGUAGE plpgsql STABLE SECURITY DEFINER
AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE 'SELECT count(*) FROM rota_jobs AS j WHERE j.queue = $1 AND j.state = ''running'''
        INTO n USING $1;
    RETURN n;
END
$$;

CREATE OR REPLACE FUNCTION rota_keda_oldest_age(queue text) RETURNS double precision
LANGUAGE plpgsql STABLE SECURITY DEFINER
AS $$
DECLARE
    age double precision;
BEGIN
    EXECUTE 'SELECT COALESCE(EXTRACT(EPOCH FROM now() - LEAST(
                 (SELECT min(j.run_at) FROM rota_jobs AS j
                  WHERE j.queue = $1 AND j.state = ''available''),
                 (SELECT min(j.run_at) FROM rota_jobs AS j
                  WHERE j.queue = $1 AND j.state IN (''scheduled'', ''retryable'')
                    AND j.run_at <= now())
             ))::float8, 0.0)'
        INTO age USING $1;
    RETURN age;
END
$$;

-- CREATE OR REPLACE drops the settings a function had: pin the search_path again.
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
