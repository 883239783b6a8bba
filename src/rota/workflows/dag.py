"""DAG checks as pure functions: every dependency names a step, no cycles, and one stable
topological order (declaration order among steps that are ready together)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from rota.errors import WorkflowError


def topological_order(workflow: str, edges: Mapping[str, Sequence[str]]) -> list[str]:
    """The steps of `edges` (step -> the steps it runs after) so that every step comes
    after its dependencies; raise WorkflowError naming an unknown step or a cycle."""
    for step, parents in edges.items():
        for parent in parents:
            if parent == step:
                raise WorkflowError(f"workflow {workflow!r}: step {step!r} runs after itself")
            if parent not in edges:
                known = ", ".join(edges) or "none"
                raise WorkflowError(
                    f"workflow {workflow!r}: step {step!r} runs after {parent!r}, which is not "
                    f"a step of this workflow (steps: {known})"
                )
    position = {name: i for i, name in enumerate(edges)}
    waiting = {step: len(set(parents)) for step, parents in edges.items()}
    children: dict[str, list[str]] = {step: [] for step in edges}
    for step, parents in edges.items():
        for parent in set(parents):
            children[parent].append(step)
    ready = sorted((s for s, n in waiting.items() if n == 0), key=position.__getitem__)
    order: list[str] = []
    while ready:
        step = ready.pop(0)
        order.append(step)
        for child in children[step]:
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
        ready.sort(key=position.__getitem__)
    if len(order) < len(edges):
        cycle = find_cycle(edges, set(edges) - set(order))
        raise WorkflowError(
            f"workflow {workflow!r} has a cycle: {' -> '.join(cycle)}; a workflow must be a "
            "DAG (remove one of these after= dependencies)"
        )
    return order


def find_cycle(edges: Mapping[str, Sequence[str]], among: set[str]) -> list[str]:
    """One cycle through the steps in `among` (each of which lies on or behind a cycle),
    as a path that starts and ends at the same step, in dependency direction."""
    start = min(among, key=list(edges).index)
    path: list[str] = []
    seen: dict[str, int] = {}
    step = start
    while step not in seen:
        seen[step] = len(path)
        path.append(step)
        # Some parent of a blocked step is blocked too; follow it until a step repeats.
        step = next(p for p in edges[step] if p in among)
    cycle = [*path[seen[step] :], step]
    cycle.reverse()  # show it as "a -> b": b runs after a
    return cycle


def descendants(edges: Mapping[str, Sequence[str]], step: str) -> set[str]:
    """Every step that runs (directly or indirectly) after `step`."""
    found: set[str] = set()
    frontier = [step]
    while frontier:
        current = frontier.pop()
        for child, parents in edges.items():
            if current in parents and child not in found:
                found.add(child)
                frontier.append(child)
    return found
