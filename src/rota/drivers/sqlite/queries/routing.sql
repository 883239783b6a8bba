-- name: worker_advertise
-- Record or renew a worker's queues and capabilities (JSON arrays) until now + ttl.
INSERT INTO rota_workers (id, queues, capabilities, started_at, seen_at, expires_at)
SELECT :id, :queues, :caps, n.now, n.now, n.now + :ttl
FROM (SELECT (julianday('now') - 2440587.5) * 86400.0 AS now) AS n
WHERE true
ON CONFLICT (id) DO UPDATE
SET queues = excluded.queues,
    capabilities = excluded.capabilities,
    seen_at = excluded.seen_at,
    expires_at = excluded.expires_at

-- name: worker_prune_expired
-- Drop rows of workers gone for an hour (a crashed worker never retires its own).
DELETE FROM rota_workers WHERE expires_at < (julianday('now') - 2440587.5) * 86400.0 - 3600

-- name: worker_retire
-- Forget a stopping worker's advertisement.
DELETE FROM rota_workers WHERE id = :id

-- name: worker_list_live
-- Workers whose advertisement has not expired.
SELECT * FROM rota_workers WHERE expires_at > (julianday('now') - 2440587.5) * 86400.0
ORDER BY id

-- name: job_list_unroutable
-- Waiting jobs with requirements that no live worker serving their queue covers, grouped
-- by queue and requirements (stored sorted, so equal sets are equal text).
SELECT j.queue, j.requires, count(*) AS waiting, min(j.id) AS oldest_job_id,
       min(j.created_at) AS oldest_created_at
FROM rota_jobs AS j
WHERE j.requires IS NOT NULL AND (j.state = 'scheduled' OR j.state = 'available' OR j.state = 'retryable')
  AND (:queue IS NULL OR j.queue = :queue)
  AND NOT EXISTS (
      SELECT 1 FROM rota_workers AS w
      WHERE w.expires_at > (julianday('now') - 2440587.5) * 86400.0
        AND EXISTS (SELECT 1 FROM json_each(w.queues) AS q WHERE q.value = j.queue)
        AND NOT EXISTS (
            SELECT 1 FROM json_each(j.requires) AS r
            WHERE NOT EXISTS (SELECT 1 FROM json_each(w.capabilities) AS c
                              WHERE c.value = r.value)))
GROUP BY j.queue, j.requires
ORDER BY min(j.id)
LIMIT :limit
