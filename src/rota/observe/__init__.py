"""Observability: structured logs now; metrics and traces build on the same seams."""
