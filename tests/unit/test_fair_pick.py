"""Properties of the fair pick (rota.tenants.fair): caps hold, the pick is as large as
it can be, each tenant's jobs go in order, and the load ends up as level as it can."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from rota.tenants.fair import Candidate, fair_pick

T0 = datetime(2026, 1, 1, tzinfo=UTC)
TENANTS = st.sampled_from([None, "a", "b", "c", "d"])


@st.composite
def instances(
    draw: st.DrawFn,
) -> tuple[list[Candidate], dict[str | None, int], dict[str, int], int]:
    count = draw(st.integers(0, 40))
    candidates = [
        Candidate(
            id=i + 1,
            tenant=draw(TENANTS),
            priority=draw(st.integers(-1, 1)),
            run_at=T0 + timedelta(seconds=draw(st.integers(0, 5))),
        )
        for i in range(count)
    ]
    running = draw(st.dictionaries(TENANTS, st.integers(0, 6)))
    caps = draw(st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 6)))
    return candidates, running, caps, draw(st.integers(0, 30))


def _order(c: Candidate) -> tuple[int, datetime, int]:
    return (c.priority, c.run_at, c.id)


@settings(max_examples=300, deadline=None)
@given(instances())
def test_fair_pick_properties(
    instance: tuple[list[Candidate], dict[str | None, int], dict[str, int], int],
) -> None:
    candidates, running, caps, n = instance
    picked = fair_pick(candidates, running, caps, n)
    by_id = {c.id: c for c in candidates}
    assert len(set(picked)) == len(picked) and set(picked) <= set(by_id)

    def room(tenant: str | None) -> int:
        waiting = sum(1 for c in candidates if c.tenant == tenant)
        if tenant is not None and tenant in caps:
            return min(waiting, max(0, caps[tenant] - running.get(tenant, 0)))
        return waiting

    tenants = {c.tenant for c in candidates}
    got = {t: [by_id[i] for i in picked if by_id[i].tenant == t] for t in tenants}
    # Caps hold: no tenant ends above its cap.
    for t in tenants:
        assert len(got[t]) <= room(t)
    # As many as allowed: n, or every job the caps let through.
    assert len(picked) == min(n, sum(room(t) for t in tenants))
    # Within a tenant, its first jobs in (priority, run_at, id) order.
    for t in tenants:
        mine = sorted((c for c in candidates if c.tenant == t), key=_order)
        assert sorted(got[t], key=_order) == mine[: len(got[t])]
    # Level: a tenant that got k jobs had a load no higher than any tenant left with room.
    for t in tenants:
        if not got[t]:
            continue
        top = running.get(t, 0) + len(got[t])
        for u in tenants:
            if len(got[u]) < room(u):
                assert top <= running.get(u, 0) + len(got[u]) + 1


def test_a_burst_does_not_starve_a_small_tenant() -> None:
    burst = [Candidate(i, "a", 0, T0) for i in range(1, 1001)]
    late = [Candidate(2000, "b", 0, T0 + timedelta(hours=1))]
    picked = fair_pick(burst + late, {"a": 5}, {}, 10)
    assert 2000 in picked[:1]  # b has nothing running: its job goes first
    assert fair_pick(burst + late, {}, {"a": 3}, 10) == [1, 2000, 2, 3]
