"""What the engine records as it works: process-local job counters (metrics.py), the
bookkeeping around each attempt (attempts.py), OpenTelemetry spans (tracing.py) and the
log context and formats (logging.py). Exporters live in rota.observe."""
