-- name: saga_insert
-- A new saga on its first step; nothing when the business key is taken.
INSERT INTO rota_sagas (key, name, step, plan, data, history)
VALUES (%(key)s, %(name)s, %(step)s, %(plan)s::jsonb, %(data)s::jsonb,
        jsonb_build_array(%(entry)s::jsonb || jsonb_build_object('at', now())))
ON CONFLICT (key) DO NOTHING
RETURNING *

-- name: saga_set_job
-- Point a new saga at the job of its first step (same transaction as the insert).
UPDATE rota_sagas SET job_id = %(job_id)s,
    deadline_at = CASE WHEN %(deadline)s::float8 IS NULL THEN NULL
                       ELSE now() + make_interval(secs => %(deadline)s::float8) END
WHERE id = %(id)s
RETURNING *

-- name: saga_lock
-- The saga row, locked until the transaction ends: transitions are serialised.
SELECT * FROM rota_sagas WHERE id = %(id)s FOR UPDATE

-- name: saga_try_lock
-- The saga row locked like saga_lock, or nothing while another transaction holds it (a
-- step running in its transaction): the supervisor passes it over instead of waiting.
SELECT * FROM rota_sagas WHERE id = %(id)s FOR UPDATE SKIP LOCKED

-- name: saga_lock_key
SELECT * FROM rota_sagas WHERE key = %(key)s FOR UPDATE

-- name: saga_job_lock
-- The state of a saga's current job, locked until the transaction ends: no worker can
-- claim it while an abort decides (fetchers skip locked rows).
SELECT state FROM rota_jobs WHERE id = %(id)s FOR UPDATE

-- name: saga_update
-- One transition: the new status, step, job and data, a history entry, and version + 1.
UPDATE rota_sagas SET
    status = %(status)s,
    step = %(step)s,
    version = version + 1,
    job_id = %(job_id)s,
    data = %(data)s::jsonb,
    error = %(error)s,
    history = history || jsonb_build_array(%(entry)s::jsonb || jsonb_build_object('at', now())),
    deadline_at = CASE WHEN %(deadline)s::float8 IS NULL THEN NULL
                       ELSE now() + make_interval(secs => %(deadline)s::float8) END,
    updated_at = now()
WHERE id = %(id)s
RETURNING *

-- name: saga_get
SELECT * FROM rota_sagas WHERE key = %(key)s

-- name: saga_get_id
SELECT * FROM rota_sagas WHERE id = %(id)s

-- name: saga_list
-- Newest first, optionally by status and saga name; page with before_id.
SELECT * FROM rota_sagas
WHERE (%(status)s::text IS NULL OR status = %(status)s::text)
  AND (%(name)s::text IS NULL OR name = %(name)s::text)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s

-- name: saga_stalled
-- Sagas in flight whose current job ended without moving them on (dead-lettered,
-- cancelled, pruned) or whose step passed its deadline: the supervisor moves them on.
SELECT s.id, s.version, s.job_id, j.state AS job_state,
       (s.status = 'running' AND s.deadline_at IS NOT NULL AND s.deadline_at < now()) AS overdue
FROM rota_sagas s LEFT JOIN rota_jobs j ON j.id = s.job_id
WHERE s.status IN ('running', 'compensating')
  AND (j.id IS NULL
       OR j.state IN ('discarded', 'cancelled', 'completed')
       OR (s.status = 'running' AND s.deadline_at < now()))
ORDER BY s.id
LIMIT %(limit)s

-- name: saga_next_deadline
-- Seconds until the earliest running saga's step deadline passes (negative: passed; NULL:
-- none has one). The supervisor rests until then where it hears of every commit.
SELECT EXTRACT(EPOCH FROM min(deadline_at) - now())::float8 AS due_in
FROM rota_sagas WHERE status = 'running' AND deadline_at IS NOT NULL

-- name: saga_prune
-- Delete up to `limit` sagas that finished (completed or compensated) longer than `age`
-- seconds ago; failed sagas wait for a person and are kept.
DELETE FROM rota_sagas WHERE id IN (
    SELECT id FROM rota_sagas
    WHERE status IN ('completed', 'compensated')
      AND updated_at < now() - make_interval(secs => %(age)s)
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
RETURNING id
