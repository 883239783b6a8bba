-- name: job_progress_record_many
-- Store the progress running jobs reported (`p_*`), each fenced by its lease token (set
-- exactly while the job runs: the rows are found by primary key); returns ids written.
UPDATE rota_jobs AS j
SET progress = p.fraction, progress_message = p.message, progress_at = now()
FROM unnest(%(p_id)b::bigint[], %(p_token)b::uuid[], %(p_fraction)b::float8[],
            %(p_message)b::text[])
     AS p(id, token, fraction, message)
WHERE j.id = p.id AND j.lease_token = p.token
RETURNING j.id

-- name: sealed_job_scan
-- Jobs whose arguments are sealed (encrypted), by id, one page after `after`.
SELECT id, args::text AS args FROM rota_jobs
WHERE id > %(after)s AND args ? '$rota_sealed'
ORDER BY id
LIMIT %(limit)s

-- name: sealed_job_swap
-- Replace one job's sealed arguments, only if they are still the ones read (compare and swap).
UPDATE rota_jobs SET args = %(new)s::jsonb
WHERE id = %(id)s AND args = %(old)s::jsonb
RETURNING id

-- name: sealed_schedule_scan
-- Schedules whose job template carries sealed arguments, by id, one page after `after`.
SELECT id, args::text AS args FROM rota_schedules
WHERE id > %(after)s AND args ? '$rota_sealed'
ORDER BY id
LIMIT %(limit)s

-- name: sealed_schedule_swap
-- Replace one schedule's sealed arguments, only if they are still the ones read.
UPDATE rota_schedules SET args = %(new)s::jsonb
WHERE id = %(id)s AND args = %(old)s::jsonb
RETURNING id

-- name: catalog_tables
-- rota's tables in the current schema, with their columns in order.
SELECT c.relname AS name,
       array_agg(a.attname::text ORDER BY a.attnum) AS columns
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname LIKE 'rota\_%%'
GROUP BY c.relname
ORDER BY c.relname

-- name: catalog_sequences
-- rota's sequences in the current schema (serial ids).
SELECT c.relname AS name FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = current_schema() AND c.relkind = 'S' AND c.relname LIKE 'rota\_%%'
ORDER BY c.relname

-- name: catalog_functions
-- rota's functions in the current schema, with their argument types (for GRANT EXECUTE).
SELECT p.proname AS name, pg_get_function_identity_arguments(p.oid) AS args
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = current_schema() AND p.proname LIKE 'rota\_%%'
ORDER BY p.proname

-- name: catalog_schema
-- The schema rota's tables live in (the first of the search path).
SELECT current_schema() AS name

-- name: catalog_roles
-- Which of the named roles exist, with their comments (`rota db roles` marks its own).
SELECT r.rolname AS name, shobj_description(r.oid, 'pg_authid') AS comment
FROM pg_roles r WHERE r.rolname = ANY(%(names)s)
ORDER BY r.rolname

-- name: copy_recount
-- The end of `rota db copy`: the kept counts (0019) recounted from the copied jobs, and
-- the last day's throughput and workers taken from the jobs' own times, as 0019 seeded them.
-- The triggers counted each copied row as it arrived, as enqueued (and finished) in the
-- minute of the copy: the whole history in one spike on the charts. (The target held no
-- jobs before the copy, and the copy is one transaction.)
DELETE FROM rota_job_deltas;
DELETE FROM rota_job_counts;
DELETE FROM rota_job_flow;
DELETE FROM rota_workers_seen;
INSERT INTO rota_job_counts (queue, state, n)
SELECT queue, state, count(*) FROM rota_jobs GROUP BY queue, state;
INSERT INTO rota_job_flow (queue, kind, minute, n)
SELECT queue, 'enqueued', date_trunc('minute', created_at), count(*) FROM rota_jobs
WHERE created_at >= now() - interval '1 day' GROUP BY 1, 2, 3
UNION ALL
SELECT queue, state, date_trunc('minute', finished_at), count(*) FROM rota_jobs
WHERE state IN ('completed', 'discarded', 'cancelled') AND finished_at >= now() - interval '1 day'
GROUP BY 1, 2, 3;
INSERT INTO rota_workers_seen (worker, queue, last_seen)
SELECT worker, queue, max(attempted_at) FROM rota_jobs
WHERE worker IS NOT NULL AND attempted_at >= now() - interval '1 day'
GROUP BY worker, queue

-- name: copy_columns
-- Every column of rota's tables in the current schema with its type name (for `rota db copy`).
SELECT c.relname AS table_name, a.attname AS column_name, t.typname AS type_name
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
JOIN pg_type t ON t.oid = a.atttypid
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname LIKE 'rota\_%%'
ORDER BY c.relname, a.attnum

-- name: copy_foreign_keys
-- Which of rota's tables reference which (a child is copied after its parents).
SELECT DISTINCT child.relname AS child, parent.relname AS parent
FROM pg_constraint k
JOIN pg_class child ON child.oid = k.conrelid
JOIN pg_class parent ON parent.oid = k.confrelid
JOIN pg_namespace n ON n.oid = child.relnamespace
WHERE k.contype = 'f' AND n.nspname = current_schema()

-- name: copy_serial_columns
-- Columns whose values come from a sequence (set past the copied ids afterwards).
SELECT c.relname AS table_name, a.attname AS column_name
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND c.relname LIKE 'rota\_%%'
  AND pg_get_serial_sequence(quote_ident(c.relname), a.attname) IS NOT NULL
