"""rota benchmarks: enqueue and drain throughput beside a raw-SQL baseline, and
enqueue-to-start latency, on SQLite and PostgreSQL (`make bench`; docs/benchmarks.md)."""
