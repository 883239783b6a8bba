"""Tenant gauges for the cluster metrics (`rota metrics`): each tenant's running and
waiting jobs and its cap. One series per tenant: fine for tens or hundreds of tenants;
with many thousands, drop these in the scrape config."""

from __future__ import annotations

from collections.abc import Sequence

from prometheus_client.core import GaugeMetricFamily, Metric

from rota.tenants.model import TenantRecord


def tenant_families(tenants: Sequence[TenantRecord]) -> list[Metric]:
    jobs = GaugeMetricFamily(
        "rota_tenant_jobs",
        "Jobs per tenant: running, and waiting (available, scheduled or retrying).",
        labels=("tenant", "state"),
    )
    cap = GaugeMetricFamily(
        "rota_tenant_max_running",
        "A tenant's cap on running jobs in fair queues (absent: no cap).",
        labels=("tenant",),
    )
    for t in tenants:
        jobs.add_metric([t.name, "running"], t.running)
        jobs.add_metric([t.name, "waiting"], t.waiting)
        if t.max_running is not None:
            cap.add_metric([t.name], t.max_running)
    return [jobs, cap]
