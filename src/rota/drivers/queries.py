"""Named-query loader: each dialect keeps `-- name: x` blocks in .sql files, and both
dialects must define the same names (checked by a test)."""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString, cast

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)


def load(dialect: str) -> dict[str, LiteralString]:
    """All named queries of `dialect` (the package folder drivers/<dialect>/queries)."""
    folder = resources.files(f"rota.drivers.{dialect}") / "queries"
    found: dict[str, LiteralString] = {}
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".sql"):
            continue
        text = item.read_text(encoding="utf-8")
        parts = _NAME.split(text)
        # parts = [preamble, name1, body1, name2, body2, ...]
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in found:
                raise ValueError(f"query {name!r} is defined twice for {dialect}")
            lines = [ln for ln in body.strip().splitlines() if not ln.lstrip().startswith("--")]
            # Files ship inside the package: their text is as trusted as a literal.
            found[name] = cast(LiteralString, "\n".join(lines).strip())  # type: ignore[redundant-cast]
    return found


def migrations(dialect: str) -> list[tuple[int, str, str]]:
    """(version, name, sql) for each numbered migration file, in order."""
    folder = resources.files(f"rota.drivers.{dialect}") / "migrations"
    result = []
    for item in folder.iterdir():
        match = re.fullmatch(r"(\d{4})_(\w+)\.sql", item.name)
        if match:
            result.append((int(match[1]), match[2], item.read_text(encoding="utf-8")))
    result.sort()
    versions = [v for v, _, _ in result]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"{dialect} migrations are not numbered 1..n: {versions}")
    return result
