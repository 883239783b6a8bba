"""Named-query loader: each dialect keeps `-- name: x` blocks in .sql files, and both
dialects must define the same names (checked by a test).

A block may be a script of several statements, each ending a line with `;`, run in order
in one transaction; a line `-- include: other` inserts another named query as one of them.
"""

from __future__ import annotations

import re
from importlib import resources
from typing import LiteralString, cast

_NAME = re.compile(r"^--\s*name:\s*(\w+)\s*$", re.MULTILINE)
_INCLUDE = re.compile(r"^--\s*include:\s*(\w+)\s*$")


def load(dialect: str) -> dict[str, LiteralString]:
    """All named queries of `dialect` (the package folder drivers/<dialect>/queries)."""
    folder = resources.files(f"rota.drivers.{dialect}") / "queries"
    raw: dict[str, str] = {}
    for item in sorted(folder.iterdir(), key=lambda p: p.name):
        if not item.name.endswith(".sql"):
            continue
        text = item.read_text(encoding="utf-8")
        parts = _NAME.split(text)
        # parts = [preamble, name1, body1, name2, body2, ...]
        for name, body in zip(parts[1::2], parts[2::2], strict=True):
            if name in raw:
                raise ValueError(f"query {name!r} is defined twice for {dialect}")
            raw[name] = body
    found: dict[str, LiteralString] = {}
    for name in raw:
        # Files ship inside the package: their text is as trusted as a literal.
        found[name] = cast(LiteralString, _resolve(name, raw, ()))  # type: ignore[redundant-cast]
    return found


def _resolve(name: str, raw: dict[str, str], seen: tuple[str, ...]) -> str:
    if name in seen:
        raise ValueError(f"query {name!r} includes itself: {' -> '.join((*seen, name))}")
    if name not in raw:
        raise ValueError(f"{seen[-1]!r} includes an unknown query {name!r}")
    lines: list[str] = []
    for line in raw[name].strip().splitlines():
        included = _INCLUDE.match(line.strip())
        if included:
            statements = statements_of(_resolve(included[1], raw, (*seen, name)))
            lines.extend(f"{s};" for s in statements)
        elif not line.lstrip().startswith("--"):
            lines.append(line)
    return "\n".join(lines).strip().removesuffix(";").strip()


def statements_of(text: str) -> list[str]:
    """The statements of a named query: one, or a script's in order (each of them ends a
    line with `;`; the last one's `;` is optional)."""
    out: list[str] = []
    current: list[str] = []
    for line in text.splitlines():
        current.append(line)
        if line.rstrip().endswith(";"):
            out.append("\n".join(current).strip().removesuffix(";").strip())
            current = []
    tail = "\n".join(current).strip()
    if tail:
        out.append(tail)
    return [s for s in out if s]


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
