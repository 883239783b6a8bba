"""The inbox example against the real RabbitMQ on this machine: a consumer killed after
its commit but before its ack gets the message again, and the inbox skips it."""

from __future__ import annotations

import os
import socket

import pytest

from examples import inbox_rabbitmq

REQUIRE = bool(os.environ.get("ROTA_REQUIRE_RABBITMQ"))


def rabbitmq_reachable() -> bool:
    try:
        with socket.create_connection(("127.0.0.1", 5672), timeout=2):
            return True
    except OSError:
        return False


@pytest.fixture(autouse=True)
def _need_rabbitmq() -> None:
    if not rabbitmq_reachable():
        if REQUIRE:
            pytest.fail("RabbitMQ at 127.0.0.1:5672 is unreachable (ROTA_REQUIRE_RABBITMQ is set)")
        pytest.skip("RabbitMQ at 127.0.0.1:5672 is unreachable")


def test_redelivered_messages_apply_once(database_url: str) -> None:
    summary = inbox_rabbitmq.run(database_url)
    # 5 messages + 1 duplicate publish + 1 redelivery after the consumer died unacked.
    assert summary.delivered == 7
    assert summary.applied == 5
    assert summary.skipped == 2
