"""The import graph of src/rota: layers only point down, and no packages import each other
in a circle. Every import counts, also those made inside functions and those under
`if TYPE_CHECKING:` (a type-only import still ties the two packages together)."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src" / "rota"

# Lowest first. A package may import its own layer and the layers below it.
LAYERS: list[tuple[str, frozenset[str]]] = [
    ("values", frozenset({"errors", "job", "payload", "retry", "labels"})),
    ("storage", frozenset({"drivers"})),
    (
        "engine",
        frozenset(
            {
                "settings",
                "maintenance",
                "telemetry",
                "task",
                "context",
                "app",
                "plugin",
                "worker",
                "waiter",
            }
        ),
    ),
    (
        "features",
        frozenset(
            {
                "schedules",
                "batches",
                "workflows",
                "sagas",
                "events",
                "ops",
                "routing",
                "tenants",
                "security",
                "auth",
            }
        ),
    ),
    # The App with every standard feature plugged in: what the interfaces build on.
    ("standard", frozenset({"standard"})),
    ("interfaces", frozenset({"cli", "web", "k8s", "observe", "copier", "testing", "__main__"})),
]
RANK = {package: rank for rank, (_, packages) in enumerate(LAYERS) for package in packages}
LAYER_OF = {package: name for name, packages in LAYERS for package in packages}

# Edges still to be removed by the storage rewrite (issue #16). The test fails when one of
# them is gone, so this list can only shrink, and it must be empty when the issue closes.
PENDING: set[tuple[str, str]] = set()


def package_of(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return parts[0]


def imported_packages(path: Path) -> Iterator[tuple[str, int]]:
    """(rota package, line) of every import in the file, relative ones resolved."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = path.relative_to(SRC).with_suffix("").parts
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "rota" and len(parts) > 1:
                    yield parts[1], node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(own[: len(own) - node.level])
                module = base + (node.module.split(".") if node.module else [])
                if module:
                    yield module[0], node.lineno
            elif node.module and node.module.split(".")[0] == "rota":
                parts = node.module.split(".")
                if len(parts) > 1:
                    yield parts[1], node.lineno
                else:  # from rota import app, ...
                    for alias in node.names:
                        yield alias.name, node.lineno


def graph() -> dict[str, dict[str, str]]:
    """package -> {imported package: 'file:line' of the first such import}."""
    edges: dict[str, dict[str, str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        source = package_of(path)
        if source == "__init__":
            continue  # the package root re-exports the public names of every layer
        for target, line in imported_packages(path):
            if target == source or target == "__init__":
                continue
            if (SRC / target).is_dir() or (SRC / f"{target}.py").exists():
                where = f"{path.relative_to(SRC.parent.parent)}:{line}"
                edges.setdefault(source, {}).setdefault(target, where)
    return edges


def test_every_package_has_a_layer() -> None:
    packages = {package_of(p) for p in SRC.rglob("*.py") if package_of(p) != "__init__"}
    assert packages - set(RANK) == set(), "give each new package a layer in LAYERS"


def test_imports_only_point_down() -> None:
    upward = []
    for source, targets in graph().items():
        for target, where in targets.items():
            if RANK[target] > RANK[source] and (source, target) not in PENDING:
                upward.append(
                    f"{where}: {source} ({LAYER_OF[source]}) imports {target} ({LAYER_OF[target]})"
                )
    assert upward == [], "\n".join(upward)


def test_pending_edges_still_exist() -> None:
    edges = graph()
    gone = [edge for edge in PENDING if edge[1] not in edges.get(edge[0], {})]
    assert gone == [], f"remove these from PENDING, they are fixed: {gone}"


def test_no_package_circle() -> None:
    edges = {s: {t for t in ts if (s, t) not in PENDING} for s, ts in graph().items()}
    seen: set[str] = set()
    stack: list[str] = []
    on_stack: set[str] = set()
    circles: list[list[str]] = []

    def visit(node: str) -> None:
        seen.add(node)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt in on_stack:
                circles.append([*stack[stack.index(nxt) :], nxt])
            elif nxt not in seen:
                visit(nxt)
        stack.pop()
        on_stack.discard(node)

    for node in sorted(edges):
        if node not in seen:
            visit(node)
    assert circles == [], "\n".join(" -> ".join(c) for c in circles)
