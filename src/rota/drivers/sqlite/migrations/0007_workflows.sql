-- Workflows: a DAG of steps run as jobs. One row per run (its definition is a JSON
-- snapshot taken at start), one per step, and one per job of a step. `version` is bumped
-- by every change, so two controllers that read the same version cannot both apply one.
CREATE TABLE IF NOT EXISTS rota_workflows (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT    NOT NULL,
    key         TEXT    UNIQUE,
    state       TEXT    NOT NULL DEFAULT 'running',
    on_failure  TEXT    NOT NULL,
    spec        TEXT    NOT NULL,
    args        TEXT    NOT NULL DEFAULT '{}',
    version     INTEGER NOT NULL DEFAULT 0,
    error       TEXT,
    created_at  REAL    NOT NULL,
    updated_at  REAL    NOT NULL,
    finished_at REAL,
    CHECK (state IN ('running', 'completed', 'failed', 'cancelled')),
    CHECK (on_failure IN ('fail', 'continue'))
);

-- The controller's pass reads only running workflows.
CREATE INDEX IF NOT EXISTS rota_workflows_running_idx ON rota_workflows (id)
    WHERE state = 'running';
CREATE INDEX IF NOT EXISTS rota_workflows_name_idx ON rota_workflows (name, id);
-- The controller prunes finished runs past their retention.
CREATE INDEX IF NOT EXISTS rota_workflows_finished_idx ON rota_workflows (finished_at)
    WHERE state <> 'running';

CREATE TABLE IF NOT EXISTS rota_workflow_steps (
    workflow_id INTEGER NOT NULL REFERENCES rota_workflows (id) ON DELETE CASCADE,
    step        TEXT    NOT NULL,
    position    INTEGER NOT NULL,
    state       TEXT    NOT NULL DEFAULT 'pending',
    total       INTEGER,
    result      TEXT,
    error       TEXT,
    started_at  REAL,
    finished_at REAL,
    PRIMARY KEY (workflow_id, step),
    CHECK (state IN ('pending', 'running', 'completed', 'failed', 'cancelled', 'skipped'))
);

-- One row per job of a step: (workflow, step, element) is the key that makes inserting a
-- step's jobs happen once. The outcome is copied here, so it outlives the pruned job.
CREATE TABLE IF NOT EXISTS rota_workflow_jobs (
    workflow_id INTEGER NOT NULL,
    step        TEXT    NOT NULL,
    idx         INTEGER NOT NULL,
    job_id      INTEGER REFERENCES rota_jobs (id) ON DELETE SET NULL,
    state       TEXT    NOT NULL DEFAULT 'pending',
    result      TEXT,
    error       TEXT,
    finished_at REAL,
    PRIMARY KEY (workflow_id, step, idx),
    FOREIGN KEY (workflow_id, step) REFERENCES rota_workflow_steps (workflow_id, step)
        ON DELETE CASCADE,
    CHECK (state IN ('pending', 'completed', 'discarded', 'cancelled'))
);

-- The pruner deletes jobs: each delete finds its workflow row through this index.
CREATE INDEX IF NOT EXISTS rota_workflow_jobs_job_idx ON rota_workflow_jobs (job_id);
