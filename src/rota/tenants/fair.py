"""The fair pick of a fair queue's claim, in Python: the rule job_fetch_fair implements
in SQL, kept here to state it plainly and to test its properties."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class Candidate:
    """A waiting job the claim may take."""

    id: int
    tenant: str | None
    priority: int
    run_at: datetime


def fair_pick(
    candidates: Sequence[Candidate],
    running: Mapping[str | None, int],
    caps: Mapping[str, int],
    n: int,
) -> list[int]:
    """Ids of up to `n` jobs to claim, in claim order.

    Each tenant (jobs without one form one more group) offers its jobs in (priority,
    run_at, id) order, at most `cap - running` of them; the k-th job of a group with r
    jobs running ranks r + k. Taking jobs by rank (then priority, run_at, id) tops up the
    tenants with the fewest running jobs first: water-filling, so one tenant's burst
    cannot hold back another tenant's first job."""
    groups: dict[str | None, list[Candidate]] = defaultdict(list)
    for c in candidates:
        groups[c.tenant].append(c)
    ranked: list[tuple[int, int, datetime, int]] = []
    for tenant, jobs in groups.items():
        jobs.sort(key=lambda c: (c.priority, c.run_at, c.id))
        busy = running.get(tenant, 0)
        room = len(jobs)
        if tenant is not None and tenant in caps:
            room = max(0, caps[tenant] - busy)
        for k, c in enumerate(jobs[:room], start=1):
            ranked.append((busy + k, c.priority, c.run_at, c.id))
    ranked.sort()
    return [job_id for *_, job_id in ranked[: max(0, n)]]
