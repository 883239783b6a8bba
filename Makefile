# One task runner: CI calls these targets unchanged.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-stamp

.PHONY: demo test check lint typecheck unit bench chaos lock clean

$(STAMP): requirements.lock pyproject.toml
	@echo "Installing rota and its pinned dependencies into $(VENV) (first run only, about 30 s)..."
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet -r requirements.lock
	$(BIN)/python -m pip install --quiet --no-deps --no-build-isolation -e .
	touch $(STAMP)

## The Seatlark demo on the embedded SQLite default.
demo: $(STAMP)
	$(BIN)/python -m examples.seatlark.demo

## Everything CI checks: lint, types, then the whole test suite (SQLite and PostgreSQL).
test: check
	$(BIN)/python -m pytest -q

check: lint typecheck

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -q tests/unit

## Throughput, latency, size and idle cost, SQLite and PostgreSQL, beside a raw-SQL baseline
## and the peers (pgqueuer, huey: each in its own pinned venv under .venv-bench/, made on first
## use; never by `make test`). 17-21 minutes; BENCH_ARGS="--quick" for a smoke run.
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

## Chaos on PostgreSQL: 10,000 orders, SIGKILLs, a server restart, a SIGTERM drain (docs/reliability.md).
chaos: $(STAMP)
	$(BIN)/python -m bench.chaos

lock:
	rm -rf /tmp/rota-lock && $(PYTHON) -m venv /tmp/rota-lock
	/tmp/rota-lock/bin/pip install --quiet --upgrade pip
	/tmp/rota-lock/bin/pip install --quiet "click" "cronsim" "cryptography" "rich" "pydantic" "psycopg[binary]" \
	  "psycopg-pool" "inotify_simple" "pyyaml" "starlette" "uvicorn" pytest hypothesis mypy ruff pytest-timeout \
	  hatchling editables pika jsonschema kubernetes-validate types-PyYAML \
	  prometheus-client opentelemetry-api opentelemetry-sdk fpdf2 segno \
	  jinja2 httpx2 schemathesis selenium "sqlalchemy[asyncio]" aiosqlite django
	{ echo "# Pinned dependencies for development, tests and the demo."; echo "# Regenerate: make lock"; \
	  /tmp/rota-lock/bin/pip freeze; } > requirements.lock

clean:
	rm -rf $(VENV) .venv-bench .mypy_cache .ruff_cache .pytest_cache
