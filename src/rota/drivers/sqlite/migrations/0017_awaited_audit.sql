-- Waiting for a job (app.wait, #19): the flag a waiter sets. SQLite has no NOTIFY; a
-- waiter wakes on the change watcher (PRAGMA data_version), so no trigger is needed.
ALTER TABLE rota_jobs ADD COLUMN awaited INTEGER NOT NULL DEFAULT 0;

-- The audit of operator actions in bulk (a queue purge, a filtered cancel; #19): who,
-- when, why, what was selected and which jobs it took.
CREATE TABLE IF NOT EXISTS rota_audit (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at REAL    NOT NULL,
    principal  TEXT    NOT NULL,
    action     TEXT    NOT NULL,
    reason     TEXT    NOT NULL,
    selection  TEXT    NOT NULL,
    count      INTEGER NOT NULL DEFAULT 0,
    job_ids    TEXT    NOT NULL DEFAULT '[]'
);
