-- Waiting for a job (app.wait, #19): the flag a waiter sets. SQLite has no NOTIFY; a
-- waiter wakes on the change watcher (PRAGMA data_version), so no trigger is needed.
ALTER TABLE rota_jobs ADD COLUMN awaited INTEGER NOT NULL DEFAULT 0;
