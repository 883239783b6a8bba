-- name: schedule_upsert
-- Create a schedule or update its definition; its status (suspension, last times) is kept.
INSERT INTO rota_schedules (name, task, queue, priority, max_attempts, args, expression, timezone,
                            dst, concurrency, starting_deadline, successful_history_limit,
                            failed_history_limit, strict_missed_limit)
VALUES (%(name)s, %(task)s, %(queue)s, %(priority)s, %(max_attempts)s, %(args)s::jsonb,
        %(expression)s, %(timezone)s, %(dst)s, %(concurrency)s, %(starting_deadline)s::float8,
        %(successful_history_limit)s, %(failed_history_limit)s, %(strict_missed_limit)s)
ON CONFLICT (name) DO UPDATE
SET task = excluded.task, queue = excluded.queue, priority = excluded.priority,
    max_attempts = excluded.max_attempts, args = excluded.args, expression = excluded.expression,
    timezone = excluded.timezone, dst = excluded.dst, concurrency = excluded.concurrency,
    starting_deadline = excluded.starting_deadline,
    successful_history_limit = excluded.successful_history_limit,
    failed_history_limit = excluded.failed_history_limit,
    strict_missed_limit = excluded.strict_missed_limit, updated_at = now()
WHERE (rota_schedules.task, rota_schedules.queue, rota_schedules.priority,
       rota_schedules.max_attempts, rota_schedules.args, rota_schedules.expression,
       rota_schedules.timezone, rota_schedules.dst, rota_schedules.concurrency,
       rota_schedules.starting_deadline, rota_schedules.successful_history_limit,
       rota_schedules.failed_history_limit, rota_schedules.strict_missed_limit)
      IS DISTINCT FROM
      (excluded.task, excluded.queue, excluded.priority, excluded.max_attempts, excluded.args,
       excluded.expression, excluded.timezone, excluded.dst, excluded.concurrency,
       excluded.starting_deadline, excluded.successful_history_limit,
       excluded.failed_history_limit, excluded.strict_missed_limit)

-- name: schedule_list
-- Every schedule with its status and how many of its scheduled runs are unfinished.
SELECT s.*, s.args::text AS args_json,
       (SELECT count(*) FROM rota_schedule_runs r JOIN rota_jobs j ON j.id = r.job_id
        WHERE r.schedule_id = s.id AND r.kind = 'scheduled'
          AND j.state NOT IN ('completed', 'discarded', 'cancelled')) AS active
FROM rota_schedules s
ORDER BY s.name

-- name: schedule_get
-- One schedule by name, as schedule_list shows it.
SELECT s.*, s.args::text AS args_json,
       (SELECT count(*) FROM rota_schedule_runs r JOIN rota_jobs j ON j.id = r.job_id
        WHERE r.schedule_id = s.id AND r.kind = 'scheduled'
          AND j.state NOT IN ('completed', 'discarded', 'cancelled')) AS active
FROM rota_schedules s
WHERE s.name = %(name)s

-- name: schedule_set_suspended
-- Suspend or resume a schedule (running runs are not touched).
UPDATE rota_schedules SET suspended = %(suspended)s WHERE name = %(name)s RETURNING id

-- name: schedule_delete
-- Delete a schedule and its run records (their jobs stay until the pruner takes them).
DELETE FROM rota_schedules WHERE name = %(name)s RETURNING id

-- name: schedule_event_record
-- Remember the last event of a schedule and, if given, a tick recorded as missed.
UPDATE rota_schedules
SET last_event = %(event)s,
    last_event_at = now(),
    last_missed_time = GREATEST(last_missed_time, %(missed)s::timestamptz)
WHERE id = %(id)s

-- name: schedule_lock
-- Serialise claims on one schedule, so Forbid's check and the insert see the same runs.
SELECT id FROM rota_schedules WHERE id = %(id)s FOR UPDATE

-- name: schedule_tick_claim
-- Create the run of one tick. The tick key (schedule_id, scheduled_minute) is unique, so a
-- second claim of the same tick inserts nothing; Forbid is checked in the same statement.
INSERT INTO rota_schedule_runs (schedule_id, name, kind, scheduled_minute, scheduled_at,
                                scheduled_local, scheduler)
SELECT s.id, %(name)s::text, 'scheduled', %(minute)s::bigint, %(at)s::timestamptz,
       %(local)s::text, %(scheduler)s::text
FROM rota_schedules s
WHERE s.id = %(id)s AND NOT s.suspended
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
               WHERE r.schedule_id = s.id AND r.scheduled_minute = %(minute)s::bigint) AS taken,
       EXISTS (SELECT 1 FROM rota_schedule_runs r JOIN rota_jobs j ON j.id = r.job_id
               WHERE r.schedule_id = s.id AND r.kind = 'scheduled'
                 AND j.state NOT IN ('completed', 'discarded', 'cancelled')) AS busy
FROM rota_schedules s
WHERE s.id = %(id)s

-- name: schedule_run_link
-- Point a new run at the job it enqueued.
UPDATE rota_schedule_runs SET job_id = %(job_id)s WHERE id = %(run_id)s

-- name: schedule_last_time_set
-- Move lastScheduleTime forward to a claimed tick; refused if a later tick was started.
UPDATE rota_schedules SET last_schedule_time = %(at)s::timestamptz
WHERE id = %(id)s
  AND (last_schedule_time IS NULL OR last_schedule_time < %(at)s::timestamptz)
RETURNING id

-- name: schedule_run_insert_manual
-- A run triggered by hand: no tick key, named uniquely within its schedule.
INSERT INTO rota_schedule_runs (schedule_id, name, kind, scheduled_minute, scheduled_at,
                                scheduled_local, scheduler)
VALUES (%(id)s, %(name)s, 'manual', NULL, %(at)s::timestamptz, %(local)s, %(scheduler)s)
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
WHERE (%(schedule_id)s::bigint IS NULL OR r.schedule_id = %(schedule_id)s::bigint)
  AND (%(run_id)s::bigint IS NULL OR r.id = %(run_id)s::bigint)
  AND (NOT %(active_only)s::boolean
       OR (r.kind = 'scheduled' AND j.state NOT IN ('completed', 'discarded', 'cancelled')))
ORDER BY r.id DESC
LIMIT %(limit)s

-- name: schedule_history_due
-- Whether schedule_success_refresh or schedule_history_prune has anything to change: one
-- read instead of a write transaction of two statements on every cron pass.
-- Every join of runs to their jobs here looks each run's job up by id (a LATERAL
-- subquery with OFFSET 0, which the planner may not flatten or reorder): the runs are a
-- few per schedule, the finished jobs may be millions, and with statistics taken before a
-- drain (next to no finished job) the planner would walk every finished job and look its
-- run up, about 190 ms beside 100k jobs on every pass.
SELECT EXISTS (
           SELECT 1
           FROM (SELECT r.schedule_id, max(j.finished_at) AS finished
                 FROM rota_schedule_runs r
                 CROSS JOIN LATERAL (SELECT j.state, j.finished_at FROM rota_jobs j
                                     WHERE j.id = r.job_id OFFSET 0) AS j
                 WHERE j.state = 'completed'
                 GROUP BY r.schedule_id) AS x
           JOIN rota_schedules s ON s.id = x.schedule_id
           WHERE s.last_successful_time IS NULL OR s.last_successful_time < x.finished)
       OR EXISTS (
           SELECT 1
           FROM (SELECT r.schedule_id, j.state = 'completed' AS ok,
                        row_number() OVER (PARTITION BY r.schedule_id, j.state = 'completed'
                                           ORDER BY r.created_at DESC, r.id DESC) AS n
                 FROM rota_schedule_runs r
                 CROSS JOIN LATERAL (SELECT j.state FROM rota_jobs j
                                     WHERE j.id = r.job_id OFFSET 0) AS j
                 WHERE j.state IN ('completed', 'discarded', 'cancelled')) AS f
           JOIN rota_schedules s ON s.id = f.schedule_id
           WHERE f.n > CASE WHEN f.ok THEN s.successful_history_limit
                            ELSE s.failed_history_limit END) AS due

-- name: schedule_success_refresh
-- lastSuccessfulTime: when the newest completed run of each schedule finished.
UPDATE rota_schedules AS s
SET last_successful_time = x.finished
FROM (SELECT r.schedule_id, max(j.finished_at) AS finished
      FROM rota_schedule_runs r
      -- By id per run, as in schedule_history_due.
      CROSS JOIN LATERAL (SELECT j.state, j.finished_at FROM rota_jobs j
                          WHERE j.id = r.job_id OFFSET 0) AS j
      WHERE j.state = 'completed'
      GROUP BY r.schedule_id) AS x
WHERE s.id = x.schedule_id
  AND (s.last_successful_time IS NULL OR s.last_successful_time < x.finished)

-- name: schedule_history_prune
-- Delete the oldest finished runs (and their jobs) beyond each schedule's history limits:
-- completed runs count against successful_history_limit, the others against failed.
WITH finished AS (
    SELECT r.job_id, r.schedule_id, j.state = 'completed' AS ok,
           row_number() OVER (PARTITION BY r.schedule_id, j.state = 'completed'
                              ORDER BY r.created_at DESC, r.id DESC) AS n
    FROM rota_schedule_runs r
    -- By id per run, as in schedule_history_due.
    CROSS JOIN LATERAL (SELECT j.state FROM rota_jobs j WHERE j.id = r.job_id OFFSET 0) AS j
    WHERE j.state IN ('completed', 'discarded', 'cancelled')
),
doomed AS (
    SELECT f.job_id
    FROM finished f JOIN rota_schedules s ON s.id = f.schedule_id
    WHERE f.n > CASE WHEN f.ok THEN s.successful_history_limit ELSE s.failed_history_limit END
    LIMIT %(limit)s
)
-- The state is checked again on the row itself: a job retried meanwhile is not finished.
DELETE FROM rota_jobs j USING doomed
WHERE j.id = doomed.job_id AND j.state IN ('completed', 'discarded', 'cancelled')
