-- SQLite's 0022 rewrites the last `state IN (...)` lists it ran for each row written on
-- rota_jobs (the table's CHECK, a trigger's body) as OR chains. PostgreSQL tests a short
-- constant list in place. The migration exists so that both dialects keep the same
-- numbers and names.
SELECT 1;
