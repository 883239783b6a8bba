-- Retention of finished sagas and of published events: the pruner deletes the oldest
-- first, in small batches, through these indexes.
CREATE INDEX IF NOT EXISTS rota_sagas_finished_idx
    ON rota_sagas (updated_at) WHERE status IN ('completed', 'compensated');
CREATE INDEX IF NOT EXISTS rota_events_published_idx ON rota_events (published_at);
