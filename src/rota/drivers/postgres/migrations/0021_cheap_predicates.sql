-- SQLite's 0021 rewrites the `state IN (...)` tests of its partial indexes and triggers as
-- OR chains: it built each list into a temporary b-tree again for every row it wrote.
-- PostgreSQL tests a short constant list in place (ScalarArrayOpExpr): nothing to change.
-- The migration exists so that both dialects keep the same numbers and names.
SELECT 1;
