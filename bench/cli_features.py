"""The app `rota worker --app bench.cli_features:app` loads in the "features in use" drain:
the benchmark tasks plus every feature declared on other queues (bench/features.py). Its
database URL comes from $ROTA_DATABASE_URL, set by the benchmark."""

from __future__ import annotations

from bench.features import make_features_app

app = make_features_app(None)
