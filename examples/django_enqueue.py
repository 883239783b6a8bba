"""Enqueue in a Django transaction: inside `transaction.atomic()`, pass Django's
`connection` as `conn=` and the job commits with your model writes, or not at all.

    python -m examples.django_enqueue       # SQLite, in a temporary directory
    ROTA_DATABASE_URL=postgresql://postgres@127.0.0.1:5432/test \
        python -m examples.django_enqueue    # PostgreSQL (Django's psycopg 3 backend)

A Django project would have the settings and the model in its own modules; here they are
configured in this one file so that it runs on its own.
"""

from __future__ import annotations

import os
import tempfile
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import django
from django.conf import settings

import rota
from rota.testing import drain

app = rota.App(
    os.environ.get("ROTA_DATABASE_URL")
    or f"sqlite:///{tempfile.mkdtemp(prefix='rota-example-')}/shop.db"
)


def django_database(url: rota.App) -> dict[str, Any]:
    """Django's DATABASES["default"] for the app's database."""
    if url.url.dialect == "sqlite":
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": url.url.path}
    parts = urlsplit(url.url.raw)
    options = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return {
        "ENGINE": "django.db.backends.postgresql",
        "NAME": parts.path.lstrip("/"),
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "",
        "PORT": str(parts.port or ""),
        "OPTIONS": options,  # e.g. options=-csearch_path=... (the tests' own schema)
    }


settings.configure(
    DATABASES={"default": django_database(app)},
    INSTALLED_APPS=[],
    USE_TZ=True,
    DEFAULT_AUTO_FIELD="django.db.models.BigAutoField",
)
django.setup()

from django.db import connection, models, transaction  # noqa: E402 - after setup()


class Order(models.Model):
    total_cents = models.IntegerField()

    class Meta:
        app_label = "shop"


@app.task(queue="mail")
def send_receipt(order_id: int) -> str:
    return f"receipt for order {order_id} sent"


class CardDeclined(Exception):
    pass


def main() -> None:
    app.migrate()
    with connection.schema_editor() as editor:
        editor.create_model(Order)

    with transaction.atomic():
        order = Order.objects.create(total_cents=4500)
        kept = send_receipt.enqueue(order_id=order.id, conn=connection)
    try:
        with transaction.atomic():
            order = Order.objects.create(total_cents=9900)
            send_receipt.options(conn=connection).enqueue(order_id=order.id)
            raise CardDeclined  # the order and its job roll back together
    except CardDeclined:
        pass

    # One order and one job: the committed pair. (Compare totals, not ids: SQLite may give
    # a rolled-back row's id to the next row.)
    totals = list(Order.objects.values_list("total_cents", flat=True))
    jobs = app.list_jobs()
    assert totals == [4500] and [j.id for j in jobs] == [kept.id]
    print(f"atomic(): order {kept.args['order_id']} and its job committed, the other rolled back")
    report = drain(app)
    print(f"drained {report.completed} job: {app.wait(kept, timeout=10)}")
    connection.close()
    app.close()


if __name__ == "__main__":
    main()
