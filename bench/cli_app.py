"""The apps `rota worker --app ...` loads in the benchmark's CLI drains: `app` (the plain
benchmark tasks) and `features` (the same, with every feature declared on other queues).
Their database URL comes from $ROTA_DATABASE_URL, set by the benchmark for each run."""

from __future__ import annotations

from bench import tasks
from bench.features import make_features_app
from bench.tasks import make_app

tasks.stamp_sink = tasks.socket_sink()  # the latency measurement's stamps, when asked
app = make_app(None)
features = make_features_app(None)
