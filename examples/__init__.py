"""Runnable examples for rota; each one is run by tests/integration/test_examples.py."""
