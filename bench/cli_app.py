"""The app `rota worker --app bench.cli_app:app` loads in the benchmark's CLI runs: the
plain benchmark tasks (bench/tasks.py). Its database URL comes from $ROTA_DATABASE_URL,
set by the benchmark for each run."""

from __future__ import annotations

from bench import tasks

tasks.stamp_sink = tasks.socket_sink()  # the latency measurement's stamps, when asked
app = tasks.make_app(None)
