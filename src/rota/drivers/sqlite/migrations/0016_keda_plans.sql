-- KEDA's functions are PostgreSQL's alone (#23): nothing changes on SQLite. The file keeps
-- the migration numbers of both dialects alike.
SELECT 1;
