"""`python -m rota` runs the CLI (the worker supervisor starts children this way)."""

from rota.cli.main import main

main()
