-- name: job_await_mark
-- Mark a job as awaited (app.wait) and read it: from now on its move to a finished state
-- sends NOTIFY rota_done (the trigger of migration 0017); other jobs send nothing.
UPDATE rota_jobs SET awaited = true WHERE id = %(id)s RETURNING *

-- name: job_get_many
-- The jobs with these ids (those still stored), for the waiters a wake-up concerns.
SELECT * FROM rota_jobs WHERE id = ANY(%(ids)s::bigint[])
