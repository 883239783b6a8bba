-- name: job_progress_record_many
-- Store the progress running jobs reported (a JSON array `p` of objects), each fenced by
-- its lease token (set exactly while the job runs); returns ids written.
UPDATE rota_jobs
SET progress = c.fraction, progress_message = c.message,
    progress_at = (julianday('now') - 2440587.5) * 86400.0
FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.token') AS token,
             json_extract(value, '$.fraction') AS fraction,
             json_extract(value, '$.message') AS message
      FROM json_each(:p)) AS c
WHERE rota_jobs.id = c.id AND rota_jobs.lease_token = c.token
RETURNING rota_jobs.id

-- name: sealed_job_scan
-- Jobs whose arguments are sealed (encrypted), by id, one page after `after`.
SELECT id, args FROM rota_jobs
WHERE id > :after AND json_type(args, '$."$rota_sealed"') IS NOT NULL
ORDER BY id
LIMIT :limit

-- name: sealed_job_swap
-- Replace one job's sealed arguments, only if they are still the ones read (compare and swap).
UPDATE rota_jobs SET args = :new WHERE id = :id AND args = :old
RETURNING id

-- name: sealed_schedule_scan
-- Schedules whose job template carries sealed arguments, by id, one page after `after`.
SELECT id, args FROM rota_schedules
WHERE id > :after AND json_type(args, '$."$rota_sealed"') IS NOT NULL
ORDER BY id
LIMIT :limit

-- name: sealed_schedule_swap
-- Replace one schedule's sealed arguments, only if they are still the ones read.
UPDATE rota_schedules SET args = :new WHERE id = :id AND args = :old
RETURNING id

-- name: catalog_tables
-- rota's tables, with their columns in order (a JSON array).
SELECT m.name AS name,
       (SELECT json_group_array(p.name) FROM pragma_table_info(m.name) AS p) AS columns
FROM sqlite_master AS m
WHERE m.type = 'table' AND m.name LIKE 'rota\_%' ESCAPE '\'
ORDER BY m.name

-- name: catalog_sequences
-- SQLite has no sequence objects (INTEGER PRIMARY KEY allocates ids): none.
SELECT NULL AS name WHERE 0

-- name: catalog_functions
-- SQLite has no stored functions: none.
SELECT NULL AS name, NULL AS args WHERE 0

-- name: catalog_schema
-- SQLite has one schema.
SELECT 'main' AS name

-- name: catalog_roles
-- SQLite has no roles: none.
SELECT NULL AS name, NULL AS comment WHERE 0

-- name: copy_recount
-- The end of a copy into this database (`rota db copy` writes only to PostgreSQL today;
-- kept so the dialects answer the same names): the finished jobs' counters and the last
-- day's throughput from the jobs themselves, as 0019 seeded them, instead of what the
-- triggers saw as the rows arrived.
DELETE FROM rota_job_counts;
DELETE FROM rota_job_marks;
DELETE FROM rota_job_flow;
INSERT INTO rota_job_counts (queue, state, worker, n, entered, last_at)
SELECT queue, state, COALESCE(worker, ''), count(*), count(*), max(finished_at) FROM rota_jobs
WHERE (state = 'completed' OR state = 'discarded' OR state = 'cancelled') GROUP BY queue, state, 3;
INSERT INTO rota_job_marks (queue, state, worker, entered)
SELECT queue, state, worker, entered FROM rota_job_counts;
INSERT INTO rota_job_marks (queue, state, worker, entered)
SELECT '', 'enqueued', '', COALESCE(max(id), 0) FROM rota_jobs;
INSERT INTO rota_job_flow (minute, queue, kind, n)
SELECT CAST(created_at / 60 AS INTEGER) * 60 AS m, queue, 'enqueued', count(*) FROM rota_jobs
WHERE created_at >= (julianday('now') - 2440587.5) * 86400.0 - 86400 GROUP BY m, queue;
INSERT INTO rota_job_flow (minute, queue, kind, n)
SELECT CAST(finished_at / 60 AS INTEGER) * 60 AS m, queue, state, count(*) FROM rota_jobs
WHERE (state = 'completed' OR state = 'discarded' OR state = 'cancelled')
  AND finished_at >= (julianday('now') - 2440587.5) * 86400.0 - 86400
GROUP BY m, queue, state

-- name: copy_columns
-- Every column of rota's tables with its declared type (for `rota db copy`).
SELECT m.name AS table_name, p.name AS column_name, lower(p.type) AS type_name
FROM sqlite_master AS m, pragma_table_info(m.name) AS p
WHERE m.type = 'table' AND m.name LIKE 'rota\_%' ESCAPE '\'
ORDER BY m.name, p.cid

-- name: copy_foreign_keys
-- Which of rota's tables reference which (a child is copied after its parents).
SELECT DISTINCT m.name AS child, f."table" AS parent
FROM sqlite_master AS m, pragma_foreign_key_list(m.name) AS f
WHERE m.type = 'table' AND m.name LIKE 'rota\_%' ESCAPE '\'

-- name: copy_serial_columns
-- SQLite allocates INTEGER PRIMARY KEY ids from the table itself: nothing to move on.
SELECT NULL AS table_name, NULL AS column_name WHERE 0
