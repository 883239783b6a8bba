-- name: saga_insert
-- A new saga on its first step; nothing when the business key is taken.
INSERT INTO rota_sagas (key, name, step, plan, data, history, created_at, updated_at)
VALUES (:key, :name, :step, :plan, :data,
        json_array(json_set(:entry, '$.at', (julianday('now') - 2440587.5) * 86400.0)),
        (julianday('now') - 2440587.5) * 86400.0, (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (key) DO NOTHING
RETURNING *

-- name: saga_set_job
-- Point a new saga at the job of its first step (same transaction as the insert).
UPDATE rota_sagas SET job_id = :job_id,
    deadline_at = CASE WHEN :deadline IS NULL THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 + :deadline END
WHERE id = :id
RETURNING *

-- name: saga_lock
-- The saga row; the caller's BEGIN IMMEDIATE holds the write lock, so it cannot change.
SELECT * FROM rota_sagas WHERE id = :id

-- name: saga_try_lock
-- The saga row (the write transaction serialises moves, so it is never held by another).
SELECT * FROM rota_sagas WHERE id = :id

-- name: saga_lock_key
SELECT * FROM rota_sagas WHERE key = :key

-- name: saga_job_lock
-- The state of a saga's current job (the caller's write transaction already keeps
-- workers from claiming it).
SELECT state FROM rota_jobs WHERE id = :id

-- name: saga_update
-- One transition: the new status, step, job and data, a history entry, and version + 1.
UPDATE rota_sagas SET
    status = :status,
    step = :step,
    version = version + 1,
    job_id = :job_id,
    data = :data,
    error = :error,
    history = json_insert(history, '$[#]',
        json_set(:entry, '$.at', (julianday('now') - 2440587.5) * 86400.0)),
    deadline_at = CASE WHEN :deadline IS NULL THEN NULL
                       ELSE (julianday('now') - 2440587.5) * 86400.0 + :deadline END,
    updated_at = (julianday('now') - 2440587.5) * 86400.0
WHERE id = :id
RETURNING *

-- name: saga_get
SELECT * FROM rota_sagas WHERE key = :key

-- name: saga_get_id
SELECT * FROM rota_sagas WHERE id = :id

-- name: saga_list
-- Newest first, optionally by status and saga name; page with before_id.
SELECT * FROM rota_sagas
WHERE (:status IS NULL OR status = :status)
  AND (:name IS NULL OR name = :name)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC
LIMIT :limit

-- name: saga_stalled
-- Sagas in flight whose current job ended without moving them on (dead-lettered,
-- cancelled, pruned) or whose step passed its deadline: the supervisor moves them on.
SELECT s.id, s.version, s.job_id, j.state AS job_state,
       (s.status = 'running' AND s.deadline_at IS NOT NULL
        AND s.deadline_at < (julianday('now') - 2440587.5) * 86400.0) AS overdue
FROM rota_sagas s LEFT JOIN rota_jobs j ON j.id = s.job_id
WHERE s.status IN ('running', 'compensating')
  AND (j.id IS NULL
       OR j.state IN ('discarded', 'cancelled', 'completed')
       OR (s.status = 'running' AND s.deadline_at < (julianday('now') - 2440587.5) * 86400.0))
ORDER BY s.id
LIMIT :limit

-- name: saga_next_deadline
-- Seconds until the earliest running saga's step deadline passes (negative: passed; NULL:
-- none has one). The supervisor rests until then where it hears of every commit.
SELECT min(deadline_at) - (julianday('now') - 2440587.5) * 86400.0 AS due_in
FROM rota_sagas WHERE status = 'running' AND deadline_at IS NOT NULL

-- name: saga_prune
-- Delete up to `limit` sagas that finished (completed or compensated) longer than `age`
-- seconds ago; failed sagas wait for a person and are kept.
DELETE FROM rota_sagas WHERE id IN (
    SELECT id FROM rota_sagas
    WHERE status IN ('completed', 'compensated')
      AND updated_at < (julianday('now') - 2440587.5) * 86400.0 - :age
    ORDER BY updated_at
    LIMIT :limit
)
RETURNING id
