-- name: dead_letter_list
-- Dead letters matching a selection, newest first (the filter is shared by the three
-- dead_letter queries: keep them in step).
SELECT * FROM rota_jobs
WHERE state = 'discarded'
  AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
  AND (%(task)s::text IS NULL OR task = %(task)s::text)
  AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
  AND (%(partition_key)s::text IS NULL OR partition_key = %(partition_key)s::text)
  AND (%(error_type)s::text IS NULL
       OR history -> -1 ->> 'error_type' = %(error_type)s::text
       OR right(history -> -1 ->> 'error_type', length(%(error_type)s::text) + 1)
          = '.' || %(error_type)s::text)
  AND (%(text)s::text IS NULL
       OR strpos(lower(COALESCE(history -> -1 ->> 'message', '')), lower(%(text)s::text)) > 0)
  AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR finished_at < %(until)s::timestamptz)
  AND (%(before_id)s::bigint IS NULL OR id < %(before_id)s::bigint)
ORDER BY id DESC
LIMIT %(limit)s

-- name: dead_letter_count
-- How many dead letters of each task a replay of this selection would take (the oldest
-- `limit`), and how many match in all.
WITH matched AS (
    SELECT id, task FROM rota_jobs
    WHERE state = 'discarded'
      AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
      AND (%(task)s::text IS NULL OR task = %(task)s::text)
      AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
      AND (%(partition_key)s::text IS NULL OR partition_key = %(partition_key)s::text)
      AND (%(error_type)s::text IS NULL
           OR history -> -1 ->> 'error_type' = %(error_type)s::text
           OR right(history -> -1 ->> 'error_type', length(%(error_type)s::text) + 1)
              = '.' || %(error_type)s::text)
      AND (%(text)s::text IS NULL
           OR strpos(lower(COALESCE(history -> -1 ->> 'message', '')), lower(%(text)s::text)) > 0)
      AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
      AND (%(until)s::timestamptz IS NULL OR finished_at < %(until)s::timestamptz)
),
taken AS (SELECT task FROM matched ORDER BY id LIMIT %(limit)s)
SELECT task, count(*) AS n, (SELECT count(*) FROM matched) AS matched
FROM taken GROUP BY task ORDER BY task

-- name: dead_letter_replay
-- Put the oldest `limit` dead letters of a selection back in their queues, paced: job k
-- (from 0, in id order, so partition order holds) becomes due k / rate seconds from now.
-- Locked rows are skipped, so two replays racing never take the same dead letter.
-- moves: discarded -> available, scheduled
WITH picked AS (
    SELECT id, row_number() OVER (ORDER BY id) - 1 AS rank FROM (
        SELECT id FROM rota_jobs
        WHERE state = 'discarded'
          AND (%(ids)s::bigint[] IS NULL OR id = ANY(%(ids)s::bigint[]))
          AND (%(task)s::text IS NULL OR task = %(task)s::text)
          AND (%(queue)s::text IS NULL OR queue = %(queue)s::text)
          AND (%(partition_key)s::text IS NULL OR partition_key = %(partition_key)s::text)
          AND (%(error_type)s::text IS NULL
               OR history -> -1 ->> 'error_type' = %(error_type)s::text
               OR right(history -> -1 ->> 'error_type', length(%(error_type)s::text) + 1)
                  = '.' || %(error_type)s::text)
          AND (%(text)s::text IS NULL
               OR strpos(lower(COALESCE(history -> -1 ->> 'message', '')),
                         lower(%(text)s::text)) > 0)
          AND (%(since)s::timestamptz IS NULL OR finished_at >= %(since)s::timestamptz)
          AND (%(until)s::timestamptz IS NULL OR finished_at < %(until)s::timestamptz)
        ORDER BY id
        LIMIT %(limit)s
        FOR UPDATE SKIP LOCKED
    ) AS s
),
moved AS (
    UPDATE rota_jobs AS j
    SET state = CASE WHEN %(rate)s::float8 IS NULL OR picked.rank = 0 THEN 'available'
                     ELSE 'scheduled' END,
        run_at = now() + make_interval(secs => COALESCE(picked.rank / %(rate)s::float8, 0)),
        finished_at = NULL,
        cancel_requested = false,
        expires_at = NULL,  -- an operator asked for it: a passed deadline no longer applies
        max_attempts = j.attempt + %(attempts)s,
        meta = COALESCE(j.meta, '{}'::jsonb) || jsonb_build_object('replay_id', %(replay_id)s::bigint)
    FROM picked
    WHERE j.id = picked.id
    RETURNING j.id, j.task, j.queue, j.state
)
SELECT id, task, queue, state,
       CASE WHEN state = 'available' THEN pg_notify('rota_jobs', queue) END AS notified
FROM moved ORDER BY id

-- name: dead_letter_dismiss
-- Give up on dead letters: they become cancelled (no longer blocking their partition key),
-- with who and why kept in their metadata.
-- moves: discarded -> cancelled
UPDATE rota_jobs
SET state = 'cancelled',
    finished_at = now(),
    meta = COALESCE(meta, '{}'::jsonb) || jsonb_build_object(
        'dismissed', jsonb_build_object('by', %(principal)s::text, 'reason', %(reason)s::text,
                                        'at', now()))
WHERE id = ANY(%(ids)s::bigint[]) AND state = 'discarded'
RETURNING id, queue, CASE WHEN partition_key IS NOT NULL THEN pg_notify('rota_jobs', queue) END
