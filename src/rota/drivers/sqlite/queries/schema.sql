-- name: schema_create_migrations
-- The ledger of applied migrations.
CREATE TABLE IF NOT EXISTS rota_migrations (
    version    INTEGER PRIMARY KEY,
    name       TEXT NOT NULL,
    applied_at REAL NOT NULL DEFAULT ((julianday('now') - 2440587.5) * 86400.0)
)

-- name: schema_lock
-- BEGIN IMMEDIATE already serialises writers; this is a harmless read kept for parity.
SELECT 1

-- name: schema_version
-- The highest applied migration (0 when none).
SELECT COALESCE(MAX(version), 0) FROM rota_migrations

-- name: schema_record
-- Remember one applied migration.
INSERT INTO rota_migrations (version, name) VALUES (:version, :name)

-- name: schema_has_table
-- Whether the migrations ledger exists.
SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'rota_migrations')

-- name: db_now
-- The database clock (the host clock, which every process on this host shares).
SELECT (julianday('now') - 2440587.5) * 86400.0
