"""examples/order_fulfilment.py runs end to end, as a user runs it, on both dialects."""

from __future__ import annotations

from tests.integration.test_examples import run


def test_order_fulfilment(database_url: str) -> None:
    out = run(["-m", "examples.order_fulfilment"], url=database_url)
    assert "order-41: completed" in out
    assert "order-42: compensated (__main__.CardDeclined: card declined for order-42" in out
    assert "order-43: compensated (RuntimeError: no courier delivers to Atlantis" in out
    # Compensations ran in reverse: refund before release, and only for completed steps.
    order_43 = out.split("order-43:")[1]
    assert order_43.index("take_payment ") < order_43.index("reserve_stock   -> compensated")
    assert "payment calls:  ['order-41/charge', 'order-43/charge', 'order-43/refund']" in out
    assert "courier calls:  ['order-41/ship']" in out
    assert "'order-42/release'" in out and "'order-41/release'" not in out
