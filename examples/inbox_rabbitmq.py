"""Consume payment events from RabbitMQ exactly once.

RabbitMQ redelivers a message whose consumer died before acknowledging it. The handler
records the message id in rota's inbox in the same transaction as its effect (a payment
row and a follow-up job), so a redelivered message is recognised and skipped, however the
consumer died. Run: python -m examples.inbox_rabbitmq [--database-url URL]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import uuid
from dataclasses import dataclass

import pika
from pika.adapters.blocking_connection import BlockingChannel

import rota

AMQP_URL = os.environ.get("ROTA_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/%2F")
SOURCE = "rabbitmq:seatlark.payments"


@dataclass
class Summary:
    delivered: int = 0  # deliveries seen by the consumers, redeliveries included
    applied: int = 0  # payments written
    skipped: int = 0  # redeliveries recognised by the inbox


def make_app(url: str) -> rota.App:
    app = rota.App(url)

    @app.task(name="payments.send_receipt", queue="mail")
    def send_receipt(payment_id: str) -> None:
        """Mails the receipt (a later worker runs it)."""

    return app


def handle(app: rota.App, body: bytes, message_id: str, summary: Summary) -> None:
    """Apply one delivery: the inbox row, the payment and the follow-up job commit together."""
    payment = json.loads(body)
    mark = "?" if app.driver.dialect == "sqlite" else "%s"
    summary.delivered += 1
    with app.transaction() as conn:
        if not app.inbox_record(conn, SOURCE, message_id):
            summary.skipped += 1
            return
        conn.execute(
            f"INSERT INTO payments (id, order_id, cents) VALUES ({mark}, {mark}, {mark})",
            (message_id, payment["order_id"], payment["cents"]),
        )
        app.tasks["payments.send_receipt"].enqueue(payment_id=message_id, conn=conn)
        summary.applied += 1


def publish(channel: BlockingChannel, queue: str, message_id: str, order_id: int) -> None:
    body = json.dumps({"order_id": order_id, "cents": 4_900}).encode()
    channel.basic_publish("", queue, body, pika.BasicProperties(message_id=message_id))


def consume(app: rota.App, queue: str, summary: Summary, *, crash_after: str | None) -> None:
    """Handle messages until the queue is empty; with `crash_after`, die (close the
    connection without acknowledging) right after that message's transaction commits."""
    connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
    channel = connection.channel()
    while True:
        method, properties, body = channel.basic_get(queue, auto_ack=False)
        if method is None:
            break
        handle(app, body, properties.message_id, summary)
        if properties.message_id == crash_after:
            connection.close()  # unacknowledged: RabbitMQ will deliver it again
            return
        channel.basic_ack(method.delivery_tag)
    connection.close()


def run(url: str) -> Summary:
    app = make_app(url)
    app.migrate()
    with app.transaction() as conn:
        conn.execute(
            "CREATE TABLE IF NOT EXISTS payments "
            "(id TEXT PRIMARY KEY, order_id INTEGER, cents INTEGER)"
        )
    queue = f"seatlark.payments.{uuid.uuid4().hex[:8]}"
    connection = pika.BlockingConnection(pika.URLParameters(AMQP_URL))
    channel = connection.channel()
    channel.queue_declare(queue, auto_delete=False)
    try:
        for n in range(1, 6):
            publish(channel, queue, f"pay-{n}", 1000 + n)
        publish(channel, queue, "pay-2", 1002)  # the producer retried: a duplicate
        summary = Summary()
        consume(app, queue, summary, crash_after="pay-3")  # dies before acking pay-3
        consume(app, queue, summary, crash_after=None)  # gets pay-3 again, and the rest
    finally:
        channel.queue_delete(queue)
        connection.close()
    app.close()
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default = f"sqlite:///{tempfile.mkdtemp(prefix='rota-inbox-')}/inbox.db"
    parser.add_argument("--database-url", default=default)
    args = parser.parse_args()
    summary = run(args.database_url)
    print(
        f"deliveries {summary.delivered}, payments applied {summary.applied}, "
        f"redeliveries skipped {summary.skipped}"
    )


if __name__ == "__main__":
    main()
