-- KEDA's oldest-job age without reading the backlog. min(run_at) over a queue's waiting
-- jobs read every entry of the queue in the claim index ((queue, priority, run_at, id),
-- where the oldest job of each priority comes first): a scrape beside a backlog of 1M
-- jobs read 1M index entries. It now hops from one priority's head to the next (one
-- index descent each), as the queue list does (queue_oldest). (On SQLite this migration
-- moves the counting of plain completions from a per-row trigger into job_complete_many;
-- PostgreSQL counts per statement already.) The signature, SECURITY DEFINER and the
-- grants stay as they were.

CREATE OR REPLACE FUNCTION rota_keda_oldest_age(queue text) RETURNS double precision
LANGUAGE plpgsql STABLE SECURITY DEFINER
AS $$
DECLARE
    age double precision;
BEGIN
    EXECUTE 'WITH RECURSIVE heads AS (
                 (SELECT j.priority, j.run_at FROM rota_jobs AS j
                  WHERE j.queue = $1 AND j.state = ''available''
                  ORDER BY j.priority, j.run_at, j.id LIMIT 1)
                 UNION ALL
                 SELECT n.priority, n.run_at
                 FROM heads AS h
                 CROSS JOIN LATERAL (SELECT j.priority, j.run_at FROM rota_jobs AS j
                                     WHERE j.queue = $1 AND j.state = ''available''
                                       AND j.priority > h.priority
                                     ORDER BY j.priority, j.run_at, j.id LIMIT 1) AS n
             )
             SELECT COALESCE(EXTRACT(EPOCH FROM now() - LEAST(
                 (SELECT min(heads.run_at) FROM heads),
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
    EXECUTE format('ALTER FUNCTION rota_keda_oldest_age(text) SET search_path = %I, pg_temp',
                   current_schema());
END
$$;
