"""Observability exporters: Prometheus collectors for a worker (prometheus.py) and for the
cluster (cluster.py), their HTTP endpoint (server.py) and the hold metrics (holds.py). What
they export is produced by the engine in rota.telemetry (counters, spans, log context)."""
