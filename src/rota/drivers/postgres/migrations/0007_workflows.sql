-- Workflows: a DAG of steps run as jobs. One row per run (its definition is a JSON
-- snapshot taken at start), one per step, and one per job of a step. `version` is bumped
-- by every change, so two controllers that read the same version cannot both apply one.
CREATE TABLE IF NOT EXISTS rota_workflows (
    id          bigserial   PRIMARY KEY,
    name        text        NOT NULL,
    key         text        UNIQUE,
    state       text        NOT NULL DEFAULT 'running',
    on_failure  text        NOT NULL,
    spec        jsonb       NOT NULL,
    args        jsonb       NOT NULL DEFAULT '{}'::jsonb,
    version     bigint      NOT NULL DEFAULT 0,
    error       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    CONSTRAINT rota_workflows_state_check
        CHECK (state IN ('running', 'completed', 'failed', 'cancelled')),
    CONSTRAINT rota_workflows_on_failure_check CHECK (on_failure IN ('fail', 'continue'))
);

-- The controller's pass reads only running workflows.
CREATE INDEX IF NOT EXISTS rota_workflows_running_idx ON rota_workflows (id)
    WHERE state = 'running';
CREATE INDEX IF NOT EXISTS rota_workflows_name_idx ON rota_workflows (name, id);
-- The controller prunes finished runs past their retention.
CREATE INDEX IF NOT EXISTS rota_workflows_finished_idx ON rota_workflows (finished_at)
    WHERE state <> 'running';

CREATE TABLE IF NOT EXISTS rota_workflow_steps (
    workflow_id bigint      NOT NULL REFERENCES rota_workflows (id) ON DELETE CASCADE,
    step        text        NOT NULL,
    position    integer     NOT NULL,
    state       text        NOT NULL DEFAULT 'pending',
    total       integer,
    result      jsonb,
    error       text,
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (workflow_id, step),
    CONSTRAINT rota_workflow_steps_state_check CHECK (state IN
        ('pending', 'running', 'completed', 'failed', 'cancelled', 'skipped'))
);

-- One row per job of a step: (workflow, step, element) is the key that makes inserting a
-- step's jobs happen once. The outcome is copied here, so it outlives the pruned job.
CREATE TABLE IF NOT EXISTS rota_workflow_jobs (
    workflow_id bigint      NOT NULL,
    step        text        NOT NULL,
    idx         integer     NOT NULL,
    job_id      bigint      REFERENCES rota_jobs (id) ON DELETE SET NULL,
    state       text        NOT NULL DEFAULT 'pending',
    result      jsonb,
    error       text,
    finished_at timestamptz,
    PRIMARY KEY (workflow_id, step, idx),
    FOREIGN KEY (workflow_id, step) REFERENCES rota_workflow_steps (workflow_id, step)
        ON DELETE CASCADE,
    CONSTRAINT rota_workflow_jobs_state_check
        CHECK (state IN ('pending', 'completed', 'discarded', 'cancelled'))
);

-- The pruner deletes jobs: each delete finds its workflow row through this index.
CREATE INDEX IF NOT EXISTS rota_workflow_jobs_job_idx ON rota_workflow_jobs (job_id);
