-- Presence (#17; see the PostgreSQL migration): a live worker holds an flock on a file of
-- its own next to the database; a row whose file nobody holds is a worker whose process
-- died, and its running jobs are rescued at once. `session` stays NULL here.
CREATE TABLE IF NOT EXISTS rota_presence (
    worker     TEXT    PRIMARY KEY,
    key        INTEGER UNIQUE,
    host       TEXT    NOT NULL,
    pid        INTEGER NOT NULL,
    session    INTEGER,
    started_at REAL    NOT NULL,
    lost_at    REAL
);
