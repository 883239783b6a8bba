-- Processing windows and circuit breakers. A queue is paused while it has any hold: one
-- per source (an operator, a closed window, an open breaker). rota_queues.paused, which
-- the claim reads, is kept equal to "the queue has a hold" by every change of a hold.
CREATE TABLE IF NOT EXISTS rota_queue_holds (
    queue  text        NOT NULL,
    source text        NOT NULL CHECK (source IN ('manual', 'window', 'breaker')),
    reason text        NOT NULL DEFAULT '',
    since  timestamptz NOT NULL DEFAULT now(),
    until  timestamptz,
    PRIMARY KEY (queue, source)
);

-- Queues paused before holds existed were paused by an operator: keep them paused.
INSERT INTO rota_queue_holds (queue, source, reason)
SELECT name, 'manual', 'paused by an operator' FROM rota_queues WHERE paused
ON CONFLICT DO NOTHING;

-- When a queue may start jobs: `windows` is a JSON list of {"start", "end", "days"}.
CREATE TABLE IF NOT EXISTS rota_queue_windows (
    queue      text        PRIMARY KEY,
    windows    jsonb       NOT NULL,
    tz         text        NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- One circuit breaker per queue: its settings and its state, written by the leader.
CREATE TABLE IF NOT EXISTS rota_queue_breakers (
    queue          text             PRIMARY KEY,
    threshold      double precision NOT NULL CHECK (threshold > 0 AND threshold <= 1),
    min_attempts   integer          NOT NULL CHECK (min_attempts > 0),
    window_s       double precision NOT NULL CHECK (window_s > 0),
    cooldown_s     double precision NOT NULL CHECK (cooldown_s > 0),
    state          text             NOT NULL DEFAULT 'closed'
                                    CHECK (state IN ('closed', 'open', 'half_open')),
    changed_at     timestamptz      NOT NULL DEFAULT now(),
    trips          integer          NOT NULL DEFAULT 0,
    attempts       integer          NOT NULL DEFAULT 0,
    failures       integer          NOT NULL DEFAULT 0,
    trial_job_id   bigint,
    trial_attempt  integer,
    -- The queue's own rate limit while the half-open trial borrows it (restored after).
    saved_rate     boolean          NOT NULL DEFAULT false,
    saved_rate_limit  integer,
    saved_rate_period double precision,
    updated_at     timestamptz      NOT NULL DEFAULT now()
);
