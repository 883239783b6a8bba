-- name: job_await_mark
-- Mark a job as awaited (app.wait) and read it. SQLite has no NOTIFY: a waiter wakes on
-- the change watcher (PRAGMA data_version), the flag is kept for parity and inspection.
UPDATE rota_jobs SET awaited = 1 WHERE id = :id RETURNING *

-- name: job_get_many
-- The jobs with these ids (those still stored), for the waiters a wake-up concerns.
SELECT * FROM rota_jobs WHERE id IN (SELECT value FROM json_each(:ids))
