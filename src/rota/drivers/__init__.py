"""Storage drivers, one per SQL dialect, behind the Driver protocol."""

from __future__ import annotations

from rota.drivers.base import Driver
from rota.drivers.url import DatabaseURL, parse


def open_driver(url: str | DatabaseURL, *, pool_size: int = 4) -> Driver:
    """The driver for `url` (connections open lazily, on first use)."""
    parsed = parse(url)
    if parsed.dialect == "sqlite":
        from rota.drivers.sqlite.driver import SQLiteDriver

        return SQLiteDriver(parsed)
    from rota.drivers.postgres.driver import PostgresDriver

    return PostgresDriver(parsed, pool_size=pool_size)


__all__ = ["Driver", "open_driver"]
