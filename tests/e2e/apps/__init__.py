"""App modules that the e2e tests' worker subprocesses import with `--app`."""
