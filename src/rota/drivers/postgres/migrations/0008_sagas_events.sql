-- Sagas: one row per started saga, found by its business key. `plan` is the step list
-- as it was when the saga started (task names and job policy), so a saga finishes by the
-- plan it began with even if the code changes, and the leader can advance it without
-- importing the code. `version` fences the step jobs: each transition bumps it, and a
-- job carrying an older version is a no-op.
CREATE TABLE IF NOT EXISTS rota_sagas (
    id          bigserial   PRIMARY KEY,
    key         text        NOT NULL UNIQUE,
    name        text        NOT NULL,
    status      text        NOT NULL DEFAULT 'running',
    step        text,
    version     integer     NOT NULL DEFAULT 1,
    job_id      bigint,
    plan        jsonb       NOT NULL,
    data        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    error       text,
    history     jsonb       NOT NULL DEFAULT '[]'::jsonb,
    deadline_at timestamptz,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT rota_sagas_status_check
        CHECK (status IN ('running', 'compensating', 'completed', 'compensated', 'failed'))
);
CREATE INDEX IF NOT EXISTS rota_sagas_status_idx ON rota_sagas (status, id);
-- The leader's supervisor looks only at sagas in flight.
CREATE INDEX IF NOT EXISTS rota_sagas_active_idx ON rota_sagas (job_id)
    WHERE status IN ('running', 'compensating');

-- Events: facts published once; `key` makes a second publish of the same fact a no-op.
CREATE TABLE IF NOT EXISTS rota_events (
    id           bigserial   PRIMARY KEY,
    name         text        NOT NULL,
    version      integer     NOT NULL DEFAULT 1,
    payload      jsonb       NOT NULL,
    key          text        UNIQUE,
    published_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX IF NOT EXISTS rota_events_name_idx ON rota_events (name, id);

-- Subscriptions: which task reacts to which event, stored when a worker that declares
-- it starts. A publish delivers to the subscriptions stored at that moment, so the
-- publisher never needs the subscribers' code, and a new subscriber sees new events only.
CREATE TABLE IF NOT EXISTS rota_subscriptions (
    event        text        NOT NULL,
    task         text        NOT NULL,
    queue        text        NOT NULL,
    priority     smallint    NOT NULL DEFAULT 0,
    max_attempts integer     NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (event, task)
);
