-- name: step_list
-- Results of the durable steps a job has recorded, by name.
SELECT name, result FROM rota_steps WHERE job_id = :job_id

-- name: step_record
-- Record a step's result, fenced by the job's lease token (no row: the lease is lost).
INSERT INTO rota_steps (job_id, name, result, attempt, recorded_at)
SELECT id, :name, :result, attempt, (julianday('now') - 2440587.5) * 86400.0 FROM rota_jobs
WHERE id = :job_id AND lease_token = :token AND state = 'running'
ON CONFLICT (job_id, name) DO NOTHING
RETURNING name
