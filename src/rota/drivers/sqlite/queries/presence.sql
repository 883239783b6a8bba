-- name: presence_register
-- Record a worker as present (its caller already holds its lock file). A worker
-- registering again keeps its started_at; `locked` is always true here.
INSERT INTO rota_presence (worker, host, pid, session, started_at)
VALUES (:worker, :host, :pid, NULL, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (worker) DO UPDATE
SET host = excluded.host,
    pid = excluded.pid,
    started_at = CASE WHEN rota_presence.host = excluded.host AND rota_presence.pid = excluded.pid
                      THEN rota_presence.started_at ELSE excluded.started_at END,
    lost_at = NULL
RETURNING key, 1 AS locked

-- name: presence_sweep
-- Workers whose lock file nobody holds (`dead`, a JSON array the caller found by trying
-- their locks): mark when first seen so and return those lost for `grace` seconds (the
-- caller counts the workers present itself: `present` stays NULL).
UPDATE rota_presence SET lost_at = (julianday('now') - 2440587.5) * 86400.0
WHERE lost_at IS NULL AND worker IN (SELECT value FROM json_each(:dead));
SELECT worker, NULL AS present FROM rota_presence
WHERE worker IN (SELECT value FROM json_each(:dead))
  AND lost_at <= (julianday('now') - 2440587.5) * 86400.0 - :grace;

-- name: presence_forget
-- Forget workers found gone whose running jobs are all rescued.
DELETE FROM rota_presence
WHERE worker IN (SELECT value FROM json_each(:workers)) AND lost_at IS NOT NULL
  AND NOT EXISTS (SELECT 1 FROM rota_jobs j
                  WHERE j.state = 'running' AND j.worker = rota_presence.worker)

-- name: presence_leave
-- A worker stopping cleanly removes its own row.
DELETE FROM rota_presence WHERE worker = :worker

-- name: presence_list
-- Every registered worker; `held` is known only to whoever tries its lock file (NULL).
SELECT worker, host, pid, session, started_at, lost_at, NULL AS held
FROM rota_presence
ORDER BY worker

-- name: job_rescue_orphaned
-- Return the running jobs of workers found gone (their process died) to the queue at once,
-- or dead-letter them when out of attempts; the lease token is cleared, so a late write
-- of the lost attempt is refused.
-- moves: running -> available, discarded, cancelled
-- The SET list is job_rescue_expired's (job.sql) but for the history entry's error_type
-- and message: change the two together. An include inserts whole statements, and one
-- statement for both would pick its rows and its message by a flag; a shared function
-- would need a migration.
UPDATE rota_jobs
SET state = CASE WHEN cancel_requested THEN 'cancelled'
                 WHEN attempt >= max_attempts THEN 'discarded'
                 ELSE 'available' END,
    finished_at = CASE WHEN cancel_requested OR attempt >= max_attempts
                       THEN (julianday('now') - 2440587.5) * 86400.0 END,
    history = json_insert(history, '$[#]', json_object(
        'attempt', attempt, 'worker', worker,
        'started_at', attempted_at, 'finished_at', (julianday('now') - 2440587.5) * 86400.0,
        'outcome', 'lost', 'error_type', 'WorkerGone',
        'message', 'worker ' || COALESCE(worker, '?')
                   || ' is gone (its process died): rescued without waiting for its lease',
        'condition', 'DisruptionTarget', 'reason', 'WorkerLost')),
    lease_token = NULL,
    lease_expires_at = NULL
WHERE id IN (
    SELECT id FROM rota_jobs
    WHERE state = 'running' AND worker IN (SELECT value FROM json_each(:workers))
    -- No ORDER BY id: SQLite writes one transaction at a time, so there is no lock order
    -- to keep, and with ORDER BY SQLite walks every row by id instead of the running jobs' index.
    LIMIT :limit
)
RETURNING id, state, NULL
