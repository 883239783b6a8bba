"""`python -m bench.markdown results.json`: the tables of a `python -m bench --json` run
as Markdown, as docs/benchmarks.md shows them."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from bench.report import markdown


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m bench.markdown results.json", file=sys.stderr)
        return 2
    sys.stdout.write(markdown(json.loads(Path(argv[0]).read_text(encoding="utf-8"))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
