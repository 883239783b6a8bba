"""Tenants: jobs carry a tenant; fair queues share their workers among tenants and cap
each tenant's running jobs; see docs/operations.md#tenants."""
