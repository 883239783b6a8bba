-- Processing windows and circuit breakers. A queue is paused while it has any hold: one
-- per source (an operator, a closed window, an open breaker). rota_queues.paused, which
-- the claim reads, is kept equal to "the queue has a hold" by every change of a hold.
CREATE TABLE IF NOT EXISTS rota_queue_holds (
    queue  TEXT NOT NULL,
    source TEXT NOT NULL CHECK (source IN ('manual', 'window', 'breaker')),
    reason TEXT NOT NULL DEFAULT '',
    since  REAL NOT NULL,
    until  REAL,
    PRIMARY KEY (queue, source)
);

-- Queues paused before holds existed were paused by an operator: keep them paused.
INSERT OR IGNORE INTO rota_queue_holds (queue, source, reason, since)
SELECT name, 'manual', 'paused by an operator', (julianday('now') - 2440587.5) * 86400.0
FROM rota_queues WHERE paused;

-- When a queue may start jobs: `windows` is a JSON list of {"start", "end", "days"}.
CREATE TABLE IF NOT EXISTS rota_queue_windows (
    queue      TEXT PRIMARY KEY,
    windows    TEXT NOT NULL,
    tz         TEXT NOT NULL,
    updated_at REAL NOT NULL
);

-- One circuit breaker per queue: its settings and its state, written by the leader.
CREATE TABLE IF NOT EXISTS rota_queue_breakers (
    queue             TEXT    PRIMARY KEY,
    threshold         REAL    NOT NULL CHECK (threshold > 0 AND threshold <= 1),
    min_attempts      INTEGER NOT NULL CHECK (min_attempts > 0),
    window_s          REAL    NOT NULL CHECK (window_s > 0),
    cooldown_s        REAL    NOT NULL CHECK (cooldown_s > 0),
    state             TEXT    NOT NULL DEFAULT 'closed'
                              CHECK (state IN ('closed', 'open', 'half_open')),
    changed_at        REAL    NOT NULL,
    trips             INTEGER NOT NULL DEFAULT 0,
    attempts          INTEGER NOT NULL DEFAULT 0,
    failures          INTEGER NOT NULL DEFAULT 0,
    trial_job_id      INTEGER,
    trial_attempt     INTEGER,
    -- The queue's own rate limit while the half-open trial borrows it (restored after).
    saved_rate        INTEGER NOT NULL DEFAULT 0,
    saved_rate_limit  INTEGER,
    saved_rate_period REAL,
    updated_at        REAL    NOT NULL
);
