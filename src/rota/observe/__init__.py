"""Observability: process-local metrics (metrics.py, attempts.py), Prometheus collectors
for a worker (prometheus.py) and for the cluster (cluster.py) with their HTTP endpoint
(server.py), OpenTelemetry traces (tracing.py) and structured logs (logging.py)."""
