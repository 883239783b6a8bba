-- Sagas: one row per started saga, found by its business key. `plan` is the step list
-- as it was when the saga started (task names and job policy), so a saga finishes by the
-- plan it began with even if the code changes, and the leader can advance it without
-- importing the code. `version` fences the step jobs: each transition bumps it, and a
-- job carrying an older version is a no-op. Times are Unix seconds (REAL, UTC).
CREATE TABLE IF NOT EXISTS rota_sagas (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    key         TEXT    NOT NULL UNIQUE,
    name        TEXT    NOT NULL,
    status      TEXT    NOT NULL DEFAULT 'running'
        CHECK (status IN ('running', 'compensating', 'completed', 'compensated', 'failed')),
    step        TEXT,
    version     INTEGER NOT NULL DEFAULT 1,
    job_id      INTEGER,
    plan        TEXT    NOT NULL,
    data        TEXT    NOT NULL DEFAULT '{}',
    error       TEXT,
    history     TEXT    NOT NULL DEFAULT '[]',
    deadline_at REAL,
    created_at  REAL    NOT NULL,
    updated_at  REAL    NOT NULL
);
CREATE INDEX IF NOT EXISTS rota_sagas_status_idx ON rota_sagas (status, id);
CREATE INDEX IF NOT EXISTS rota_sagas_active_idx ON rota_sagas (job_id)
    WHERE status IN ('running', 'compensating');

-- Events: facts published once; `key` makes a second publish of the same fact a no-op.
CREATE TABLE IF NOT EXISTS rota_events (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    name         TEXT    NOT NULL,
    version      INTEGER NOT NULL DEFAULT 1,
    payload      TEXT    NOT NULL,
    key          TEXT    UNIQUE,
    published_at REAL    NOT NULL
);
CREATE INDEX IF NOT EXISTS rota_events_name_idx ON rota_events (name, id);

-- Subscriptions: which task reacts to which event, stored when a worker that declares
-- it starts. A publish delivers to the subscriptions stored at that moment, so the
-- publisher never needs the subscribers' code, and a new subscriber sees new events only.
CREATE TABLE IF NOT EXISTS rota_subscriptions (
    event        TEXT    NOT NULL,
    task         TEXT    NOT NULL,
    queue        TEXT    NOT NULL,
    priority     INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    created_at   REAL    NOT NULL,
    PRIMARY KEY (event, task)
);
