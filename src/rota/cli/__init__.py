"""The `rota` command line: one module per command group."""
