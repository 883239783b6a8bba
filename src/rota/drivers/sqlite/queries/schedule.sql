-- name: schedule_upsert
-- Create a schedule or update its definition; its status (suspension, last times) is kept.
INSERT INTO rota_schedules (name, task, queue, priority, max_attempts, args, expression, timezone,
                            dst, concurrency, starting_deadline, successful_history_limit,
                            failed_history_limit, strict_missed_limit, created_at, updated_at)
VALUES (:name, :task, :queue, :priority, :max_attempts, :args, :expression, :timezone, :dst,
        :concurrency, :starting_deadline, :successful_history_limit, :failed_history_limit,
        :strict_missed_limit, (julianday('now') - 2440587.5) * 86400.0,
        (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (name) DO UPDATE
SET task = excluded.task, queue = excluded.queue, priority = excluded.priority,
    max_attempts = excluded.max_attempts, args = excluded.args, expression = excluded.expression,
    timezone = excluded.timezone, dst = excluded.dst, concurrency = excluded.concurrency,
    starting_deadline = excluded.starting_deadline,
    successful_history_limit = excluded.successful_history_limit,
    failed_history_limit = excluded.failed_history_limit,
    strict_missed_limit = excluded.strict_missed_limit, updated_at = excluded.updated_at
WHERE rota_schedules.task IS NOT excluded.task OR rota_schedules.queue IS NOT excluded.queue
   OR rota_schedules.priority IS NOT excluded.priority
   OR rota_schedules.max_attempts IS NOT excluded.max_attempts
   OR rota_schedules.args IS NOT excluded.args
   OR rota_schedules.expression IS NOT excluded.expression
   OR rota_schedules.timezone IS NOT excluded.timezone OR rota_schedules.dst IS NOT excluded.dst
   OR rota_schedules.concurrency IS NOT excluded.concurrency
   OR rota_schedules.starting_deadline IS NOT excluded.starting_deadline
   OR rota_schedules.successful_history_limit IS NOT excluded.successful_history_limit
   OR rota_schedules.failed_history_limit IS NOT excluded.failed_history_limit
   OR rota_schedules.strict_missed_limit IS NOT excluded.strict_missed_limit

-- name: schedule_list
-- Every schedule with its status and how many of its scheduled runs are unfinished.
SELECT s.*, s.args AS args_json,
       (SELECT count(*) FROM rota_schedule_runs r JOIN rota_jobs j ON j.id = r.job_id
        WHERE r.schedule_id = s.id AND r.kind = 'scheduled'
          AND j.state NOT IN ('completed', 'discarded', 'cancelled')) AS active
FROM rota_schedules s
ORDER BY s.name

-- name: schedule_get
-- One schedule by name, as schedule_list shows it.
SELECT s.*, s.args AS args_json,
       (SELECT count(*) FROM rota_schedule_runs r JOIN rota_jobs j ON j.id = r.job_id
        WHERE r.schedule_id = s.id AND r.kind = 'scheduled'
          AND j.state NOT IN ('completed', 'discarded', 'cancelled')) AS active
FROM rota_schedules s
WHERE s.name = :name

-- name: schedule_set_suspended
-- Suspend or resume a schedule (running runs are not touched).
UPDATE rota_schedules SET suspended = :suspended WHERE name = :name RETURNING id

-- name: schedule_delete
-- Delete a schedule and its run records (their jobs stay until the pruner takes them).
DELETE FROM rota_schedules WHERE name = :name RETURNING id

-- name: schedule_event_record
-- Remember the last event of a schedule and, if given, a tick recorded as missed.
UPDATE rota_schedules
SET last_event = :event,
    last_event_at = (julianday('now') - 2440587.5) * 86400.0,
    last_missed_time = CASE WHEN :missed IS NULL THEN last_missed_time
                            WHEN last_missed_time IS NULL OR last_missed_time < :missed THEN :missed
                            ELSE last_missed_time END
WHERE id = :id

-- name: schedule_lock
-- Serialise claims on one schedule (BEGIN IMMEDIATE already holds the write lock here).
SELECT id FROM rota_schedules WHERE id = :id

-- name: schedule_tick_claim
-- Create the run of one tick. The tick key (schedule_id, scheduled_minute) is unique, so a
-- second claim of the same tick inserts nothing; Forbid is checked in the same statement.
INSERT INTO rota_schedule_runs (schedule_id, name, kind, scheduled_minute, scheduled_at,
                                scheduled_local, scheduler, created_at)
SELECT s.id, :name, 'scheduled', :minute, :at, :local, :scheduler,
       (julianday('now') - 2440587.5) * 86400.0
FROM rota_schedules s
WHERE s.id = :id AND NOT s.suspended
  AND (s.concurrency <> 'forbid' OR NOT EXISTS (
        SELECT 1 FROM rota_schedule_runs r JOIN rota_jobs j ON j.id = r.job_id
        WHERE r.schedule_id = s.id AND r.kind = 'scheduled'
          AND j.state NOT IN ('completed', 'discarded', 'cancelled')))
ON CONFLICT (schedule_id, scheduled_minute) DO NOTHING
RETURNING id

-- name: schedule_tick_state
-- Why a tick claim inserted nothing: taken already, suspended, or blocked by an active run.
SELECT s.suspended,
       EXISTS (SELECT 1 FROM rota_schedule_runs r
               WHERE r.schedule_id = s.id AND r.scheduled_minute = :minute) AS taken,
       EXISTS (SELECT 1 FROM rota_schedule_runs r JOIN rota_jobs j ON j.id = r.job_id
               WHERE r.schedule_id = s.id AND r.kind = 'scheduled'
                 AND j.state NOT IN ('completed', 'discarded', 'cancelled')) AS busy
FROM rota_schedules s
WHERE s.id = :id

-- name: schedule_run_link
-- Point a new run at the job it enqueued.
UPDATE rota_schedule_runs SET job_id = :job_id WHERE id = :run_id

-- name: schedule_last_time_set
-- Move lastScheduleTime forward to a claimed tick; refused if a later tick was started.
UPDATE rota_schedules SET last_schedule_time = :at
WHERE id = :id AND (last_schedule_time IS NULL OR last_schedule_time < :at)
RETURNING id

-- name: schedule_run_insert_manual
-- A run triggered by hand: no tick key, named uniquely within its schedule.
INSERT INTO rota_schedule_runs (schedule_id, name, kind, scheduled_minute, scheduled_at,
                                scheduled_local, scheduler, created_at)
VALUES (:id, :name, 'manual', NULL, :at, :local, :scheduler,
        (julianday('now') - 2440587.5) * 86400.0)
ON CONFLICT (schedule_id, name) DO NOTHING
RETURNING id

-- name: schedule_run_list
-- Runs (optionally of one schedule, one run, or only the active ones) with their job state.
SELECT r.id, r.schedule_id, s.name AS schedule, r.name, r.kind, r.scheduled_at,
       r.scheduled_local, r.job_id, j.state AS job_state, r.created_at, r.scheduler,
       j.attempted_at, j.finished_at
FROM rota_schedule_runs r
JOIN rota_schedules s ON s.id = r.schedule_id
LEFT JOIN rota_jobs j ON j.id = r.job_id
WHERE (:schedule_id IS NULL OR r.schedule_id = :schedule_id)
  AND (:run_id IS NULL OR r.id = :run_id)
  AND (NOT :active_only OR (r.kind = 'scheduled'
                            AND j.state NOT IN ('completed', 'discarded', 'cancelled')))
ORDER BY r.id DESC
LIMIT :limit

-- name: schedule_history_due
-- Whether schedule_success_refresh or schedule_history_prune has anything to change: a
-- read, so a cron pass with nothing to prune takes no write lock (the drain's writers would
-- queue behind it every second).
SELECT EXISTS (
           SELECT 1
           FROM (SELECT r.schedule_id, MAX(j.finished_at) AS finished
                 FROM rota_schedule_runs r CROSS JOIN rota_jobs j ON j.id = r.job_id
                 WHERE j.state = 'completed'
                 GROUP BY r.schedule_id) AS x
           JOIN rota_schedules s ON s.id = x.schedule_id
           WHERE s.last_successful_time IS NULL OR s.last_successful_time < x.finished)
       OR EXISTS (
           SELECT 1
           FROM (SELECT r.schedule_id, j.state = 'completed' AS ok,
                        row_number() OVER (PARTITION BY r.schedule_id, j.state = 'completed'
                                           ORDER BY r.created_at DESC, r.id DESC) AS n
                 FROM rota_schedule_runs r CROSS JOIN rota_jobs j ON j.id = r.job_id
                 WHERE j.state IN ('completed', 'discarded', 'cancelled')) AS f
           JOIN rota_schedules s ON s.id = f.schedule_id
           WHERE f.n > CASE WHEN f.ok THEN s.successful_history_limit
                            ELSE s.failed_history_limit END) AS due

-- name: schedule_success_refresh
-- lastSuccessfulTime: when the newest completed run of each schedule finished.
UPDATE rota_schedules
SET last_successful_time = x.finished
FROM (SELECT r.schedule_id, MAX(j.finished_at) AS finished
      -- CROSS JOIN keeps the runs outside: `state = 'completed'` alone would let SQLite
      -- walk every completed job in rota_jobs_finished_state_idx (its OR predicate, 0021).
      FROM rota_schedule_runs r CROSS JOIN rota_jobs j ON j.id = r.job_id
      WHERE j.state = 'completed'
      GROUP BY r.schedule_id) AS x
WHERE rota_schedules.id = x.schedule_id
  AND (rota_schedules.last_successful_time IS NULL
       OR rota_schedules.last_successful_time < x.finished)

-- name: schedule_history_prune
-- Delete the oldest finished runs (and their jobs) beyond each schedule's history limits:
-- completed runs count against successful_history_limit, the others against failed.
DELETE FROM rota_jobs
WHERE id IN (
    SELECT f.job_id
    FROM (SELECT r.job_id, r.schedule_id, j.state = 'completed' AS ok,
                 row_number() OVER (PARTITION BY r.schedule_id, j.state = 'completed'
                                    ORDER BY r.created_at DESC, r.id DESC) AS n
          -- CROSS JOIN keeps the runs outside: without statistics SQLite would walk
          -- every finished job and look its run up, holding the write lock meanwhile.
          FROM rota_schedule_runs r CROSS JOIN rota_jobs j ON j.id = r.job_id
          WHERE j.state IN ('completed', 'discarded', 'cancelled')) AS f
    JOIN rota_schedules s ON s.id = f.schedule_id
    WHERE f.n > CASE WHEN f.ok THEN s.successful_history_limit ELSE s.failed_history_limit END
    LIMIT :limit
)
-- No second state check here (PostgreSQL's has one): the statement reads and deletes under
-- the one write lock, and a state test beside `id IN` makes SQLite walk the finished jobs.
