"""`python -m bench`: see bench/runner.py and docs/benchmarks.md."""

from __future__ import annotations

import sys

from bench.runner import main

if __name__ == "__main__":
    sys.exit(main())
