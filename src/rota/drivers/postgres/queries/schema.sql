-- name: schema_create_migrations
-- The ledger of applied migrations.
CREATE TABLE IF NOT EXISTS rota_migrations (
    version    integer PRIMARY KEY,
    name       text        NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: schema_lock
-- Serialise concurrent `rota migrate` runs for the rest of the transaction.
SELECT pg_advisory_xact_lock(4242001)

-- name: schema_version
-- The highest applied migration (0 when none).
SELECT COALESCE(MAX(version), 0) FROM rota_migrations

-- name: schema_record
-- Remember one applied migration.
INSERT INTO rota_migrations (version, name) VALUES (%(version)s, %(name)s)

-- name: schema_has_table
-- Whether the migrations ledger exists in the current schema.
SELECT to_regclass('rota_migrations') IS NOT NULL

-- name: db_now
-- The database clock.
SELECT now()
