"""rota benchmarks: enqueue throughput, drain throughput beside a raw-SQL baseline, and
enqueue-to-start latency, on SQLite and PostgreSQL.

Run with `make bench` or `python -m bench --help`. See docs/benchmarks.md.
"""
