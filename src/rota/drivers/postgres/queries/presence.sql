-- name: presence_register
-- Record a worker as present and take its lock on this session, in one statement: the row
-- is seen only with its lock held. `locked` false: another live session holds it (the
-- caller rolls back). A worker registering again keeps its key and its started_at.
INSERT INTO rota_presence (worker, host, pid, session)
VALUES (%(worker)s, %(host)s, %(pid)s, pg_backend_pid())
ON CONFLICT (worker) DO UPDATE
SET host = excluded.host,
    pid = excluded.pid,
    session = excluded.session,
    started_at = CASE WHEN rota_presence.host = excluded.host AND rota_presence.pid = excluded.pid
                      THEN rota_presence.started_at ELSE now() END,
    lost_at = NULL
RETURNING key, pg_try_advisory_lock((tableoid::bigint << 32) | key) AS locked

-- name: presence_sweep
-- Workers whose lock nobody holds (their session ended): mark when first seen so (a lock
-- held again clears the mark) and return those lost for `grace` seconds, then one row
-- (worker NULL) counting the workers present. Reads the lock table once; writes only
-- when a worker's state changed. Within `settle` seconds of a server start every session
-- is new and every worker is still registering again: nobody is rescued as gone then.
WITH held AS MATERIALIZED (
    SELECT classid, objid FROM pg_locks
    WHERE locktype = 'advisory' AND objsubid = 1 AND granted
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
),
state AS MATERIALIZED (
    SELECT p.worker, p.lost_at,
           NOT EXISTS (SELECT 1 FROM held h
                       WHERE h.classid = p.tableoid AND h.objid = p.key::oid) AS gone
    FROM rota_presence p
),
marked AS (
    UPDATE rota_presence p SET lost_at = CASE WHEN s.gone THEN now() END
    FROM state s
    WHERE p.worker = s.worker AND s.gone = (p.lost_at IS NULL)
    RETURNING p.worker
)
SELECT worker, NULL::bigint AS present FROM state
WHERE gone AND (lost_at <= now() - make_interval(secs => %(grace)s)
                OR (%(grace)s <= 0 AND lost_at IS NULL))
  AND pg_postmaster_start_time() < now() - make_interval(secs => %(settle)s)
UNION ALL
SELECT NULL, count(*) FILTER (WHERE NOT gone) FROM state

-- name: presence_forget
-- Forget workers found gone whose running jobs are all rescued (a worker present again
-- has its mark cleared and stays).
DELETE FROM rota_presence p
WHERE p.worker = ANY (%(workers)s::text[]) AND p.lost_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM rota_jobs j WHERE j.state = 'running' AND j.worker = p.worker)

-- name: presence_leave
-- A worker stopping cleanly removes its own row.
DELETE FROM rota_presence WHERE worker = %(worker)s

-- name: presence_list
-- Every registered worker, and whether its presence lock is held now (`held`).
SELECT p.worker, p.host, p.pid, p.session, p.started_at, p.lost_at,
       EXISTS (SELECT 1 FROM pg_locks l
               WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted
                 AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
                 AND l.classid = p.tableoid AND l.objid = p.key::oid) AS held
FROM rota_presence p
ORDER BY p.worker

-- name: job_rescue_orphaned
-- Return the running jobs of workers found gone (their process died) to the queue at once,
-- or dead-letter them when out of attempts; the lease token is cleared, so a late write
-- of the lost attempt is refused.
-- moves: running -> available, discarded, cancelled
-- The SET list is job_rescue_expired's (job.sql) but for the history entry's error_type
-- and message: change the two together. An include inserts whole statements, and one
-- statement for both would pick its rows and its message by a flag; a shared function
-- would need a migration.
WITH orphaned AS (
    SELECT id FROM rota_jobs
    WHERE state = 'running' AND worker = ANY (%(workers)s::text[])
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE rota_jobs AS j
SET state = CASE WHEN j.cancel_requested THEN 'cancelled'
                 WHEN j.attempt >= j.max_attempts THEN 'discarded'
                 ELSE 'available' END,
    finished_at = CASE WHEN j.cancel_requested OR j.attempt >= j.max_attempts THEN now() END,
    history = j.history || jsonb_build_array(jsonb_build_object(
        'attempt', j.attempt, 'worker', j.worker,
        'started_at', j.attempted_at, 'finished_at', now(),
        'outcome', 'lost', 'error_type', 'WorkerGone',
        'message', 'worker ' || COALESCE(j.worker, '?')
                   || ' is gone (its process died): rescued without waiting for its lease',
        'condition', 'DisruptionTarget', 'reason', 'WorkerLost')),
    lease_token = NULL,
    lease_expires_at = NULL
WHERE j.id = ANY (ARRAY(SELECT id FROM orphaned))
RETURNING j.id, j.state, CASE WHEN j.state = 'available' THEN pg_notify('rota_jobs', j.queue) END
