-- Waiting for a job (app.wait, #19): a waiter flags the job `awaited`, and a trigger
-- notifies rota_done with the job's id when a flagged job finishes. The WHEN clause is
-- checked per updated row before anything is queued: a job nobody waits for costs the
-- drain no trigger call and no NOTIFY.
ALTER TABLE rota_jobs ADD COLUMN IF NOT EXISTS awaited boolean NOT NULL DEFAULT false;

CREATE OR REPLACE FUNCTION rota_jobs_notify_done() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('rota_done', NEW.id::text);
    RETURN NULL;
END
$$;

DROP TRIGGER IF EXISTS rota_jobs_awaited_done ON rota_jobs;
CREATE TRIGGER rota_jobs_awaited_done
AFTER UPDATE OF state ON rota_jobs
FOR EACH ROW
WHEN (NEW.awaited AND NEW.state IN ('completed', 'discarded', 'cancelled'))
EXECUTE FUNCTION rota_jobs_notify_done();

-- The audit of operator actions in bulk (a queue purge, a filtered cancel; #19): who,
-- when, why, what was selected and which jobs it took.
CREATE TABLE IF NOT EXISTS rota_audit (
    id         bigserial   PRIMARY KEY,
    created_at timestamptz NOT NULL DEFAULT now(),
    principal  text        NOT NULL,
    action     text        NOT NULL,
    reason     text        NOT NULL,
    selection  jsonb       NOT NULL,
    count      integer     NOT NULL DEFAULT 0,
    job_ids    jsonb       NOT NULL DEFAULT '[]'::jsonb
);
