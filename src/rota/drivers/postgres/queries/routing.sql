-- name: worker_advertise
-- Record or renew a worker's queues and capabilities until now + ttl.
INSERT INTO rota_workers (id, queues, capabilities, started_at, seen_at, expires_at)
VALUES (%(id)s, %(queues)s::text[], %(caps)s::text[], now(), now(),
        now() + make_interval(secs => %(ttl)s))
ON CONFLICT (id) DO UPDATE
SET queues = excluded.queues,
    capabilities = excluded.capabilities,
    seen_at = excluded.seen_at,
    expires_at = excluded.expires_at

-- name: worker_prune_expired
-- Drop rows of workers gone for an hour (a crashed worker never retires its own).
DELETE FROM rota_workers WHERE expires_at < now() - interval '1 hour'

-- name: worker_retire
-- Forget a stopping worker's advertisement.
DELETE FROM rota_workers WHERE id = %(id)s

-- name: worker_list_live
-- Workers whose advertisement has not expired.
SELECT * FROM rota_workers WHERE expires_at > now() ORDER BY id

-- name: job_list_unroutable
-- Waiting jobs with requirements that no live worker serving their queue covers, grouped
-- by queue and requirements (read from rota_jobs_requires_idx's rows only).
SELECT j.queue, j.requires, count(*) AS waiting, min(j.id) AS oldest_job_id,
       min(j.created_at) AS oldest_created_at
FROM rota_jobs AS j
WHERE j.requires IS NOT NULL AND j.state IN ('scheduled', 'available', 'retryable')
  AND (%(queue)s::text IS NULL OR j.queue = %(queue)s::text)
  AND NOT EXISTS (SELECT 1 FROM rota_workers AS w
                  WHERE w.expires_at > now() AND j.queue = ANY (w.queues)
                    AND j.requires <@ w.capabilities)
GROUP BY j.queue, j.requires
ORDER BY min(j.id)
LIMIT %(limit)s
