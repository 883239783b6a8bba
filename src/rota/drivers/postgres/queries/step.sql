-- name: step_list
-- Results of the durable steps a job has recorded, by name.
SELECT name, result FROM rota_steps WHERE job_id = %(job_id)s

-- name: step_record
-- Record a step's result, fenced by the job's lease token (no row: the lease is lost).
INSERT INTO rota_steps (job_id, name, result, attempt)
SELECT id, %(name)s, %(result)s::jsonb, attempt FROM rota_jobs
WHERE id = %(job_id)s AND lease_token = %(token)s::uuid AND state = 'running'
ON CONFLICT (job_id, name) DO NOTHING
RETURNING name
