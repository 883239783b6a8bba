-- name: dead_letter_list
-- Dead letters matching a selection, newest first (the filter is shared by the three
-- dead_letter queries: keep them in step).
SELECT * FROM rota_jobs
WHERE state = 'discarded'
  AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
  AND (:task IS NULL OR task = :task)
  AND (:queue IS NULL OR queue = :queue)
  AND (:partition_key IS NULL OR partition_key = :partition_key)
  AND (:error_type IS NULL
       OR json_extract(history, '$[#-1].error_type') = :error_type
       OR substr(json_extract(history, '$[#-1].error_type'), -length(:error_type) - 1)
          = '.' || :error_type)
  AND (:text IS NULL
       OR instr(lower(COALESCE(json_extract(history, '$[#-1].message'), '')), lower(:text)) > 0)
  AND (:since IS NULL OR finished_at >= :since)
  AND (:until IS NULL OR finished_at < :until)
  AND (:before_id IS NULL OR id < :before_id)
ORDER BY id DESC
LIMIT :limit

-- name: dead_letter_count
-- How many dead letters of each task a replay of this selection would take (the oldest
-- `limit`), and how many match in all.
WITH matched AS (
    SELECT id, task FROM rota_jobs
    WHERE state = 'discarded'
      AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
      AND (:task IS NULL OR task = :task)
      AND (:queue IS NULL OR queue = :queue)
      AND (:partition_key IS NULL OR partition_key = :partition_key)
      AND (:error_type IS NULL
           OR json_extract(history, '$[#-1].error_type') = :error_type
           OR substr(json_extract(history, '$[#-1].error_type'), -length(:error_type) - 1)
              = '.' || :error_type)
      AND (:text IS NULL
           OR instr(lower(COALESCE(json_extract(history, '$[#-1].message'), '')), lower(:text)) > 0)
      AND (:since IS NULL OR finished_at >= :since)
      AND (:until IS NULL OR finished_at < :until)
),
taken AS (SELECT task FROM matched ORDER BY id LIMIT :limit)
SELECT task, count(*) AS n, (SELECT count(*) FROM matched) AS matched
FROM taken GROUP BY task ORDER BY task

-- name: dead_letter_replay
-- Put the oldest `limit` dead letters of a selection back in their queues, paced: job k
-- (from 0, in id order, so partition order holds) becomes due k / rate seconds from now.
-- moves: discarded -> available, scheduled
UPDATE rota_jobs
SET state = CASE WHEN :rate IS NULL OR picked.rank = 0 THEN 'available' ELSE 'scheduled' END,
    run_at = (julianday('now') - 2440587.5) * 86400.0 + COALESCE(picked.rank / :rate, 0),
    finished_at = NULL,
    cancel_requested = 0,
    expires_at = NULL,
    max_attempts = rota_jobs.attempt + :attempts,
    meta = json_patch(COALESCE(rota_jobs.meta, '{}'), json_object('replay_id', :replay_id))
FROM (
    SELECT id, row_number() OVER (ORDER BY id) - 1 AS rank FROM (
        SELECT id FROM rota_jobs
        WHERE state = 'discarded'
          AND (:ids IS NULL OR id IN (SELECT value FROM json_each(:ids)))
          AND (:task IS NULL OR task = :task)
          AND (:queue IS NULL OR queue = :queue)
          AND (:partition_key IS NULL OR partition_key = :partition_key)
          AND (:error_type IS NULL
               OR json_extract(history, '$[#-1].error_type') = :error_type
               OR substr(json_extract(history, '$[#-1].error_type'), -length(:error_type) - 1)
                  = '.' || :error_type)
          AND (:text IS NULL
               OR instr(lower(COALESCE(json_extract(history, '$[#-1].message'), '')), lower(:text)) > 0)
          AND (:since IS NULL OR finished_at >= :since)
          AND (:until IS NULL OR finished_at < :until)
        ORDER BY id
        LIMIT :limit
    )
) AS picked
WHERE rota_jobs.id = picked.id
RETURNING rota_jobs.id, rota_jobs.task, rota_jobs.queue, rota_jobs.state, NULL AS notified

-- name: dead_letter_dismiss
-- Give up on dead letters: they become cancelled (no longer blocking their partition key),
-- with who and why kept in their metadata.
-- moves: discarded -> cancelled
UPDATE rota_jobs
SET state = 'cancelled',
    finished_at = (julianday('now') - 2440587.5) * 86400.0,
    meta = json_patch(COALESCE(meta, '{}'), json_object(
        'dismissed', json_object('by', :principal, 'reason', :reason,
                                 'at', (julianday('now') - 2440587.5) * 86400.0)))
WHERE id IN (SELECT value FROM json_each(:ids)) AND state = 'discarded'
RETURNING id, queue, NULL
