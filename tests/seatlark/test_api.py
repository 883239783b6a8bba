"""The checkout API over real HTTP (uvicorn in a subprocess) on SQLite and PostgreSQL: good
orders are saved with their ticket job, retries with the same ref are idempotent, and bad
input of every kind gets a clear 4xx and changes nothing stored."""

from __future__ import annotations

import http.client
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest

import rota
from examples.seatlark import harness
from examples.seatlark.harness import Client
from tests.conftest import PG_URL, pg_schema_url, require_postgres

GOOD = {
    "ref": "t-0001",
    "customer": "Ada Okafor",
    "email": "ada@example.com",
    "show": "mira-vale",
    "quantity": 2,
}


class Shop:
    """A running API and a way to count what is stored behind it."""

    def __init__(self, url: str, port: int) -> None:
        self.url = url
        self.client = Client(port)
        self.app = rota.App(url)

    def count(self, table: str) -> int:
        with self.app.transaction() as conn:
            row = conn.execute(f"SELECT COUNT(*) AS n FROM {table}").fetchone()
        return int(row["n"] if isinstance(row, dict) else row[0])

    def stored(self) -> tuple[int, int]:
        return self.count("orders"), self.count("rota_jobs")

    def post(self, value: object) -> harness.Response:
        return self.client.post_json("/orders", value)

    def raw(self, body: bytes, content_type: str = "application/json") -> harness.Response:
        return self.client.request("POST", "/orders", body, {"Content-Type": content_type})


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shop(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shop]:
    out = tmp_path_factory.mktemp("seatlark")
    schema = None
    if request.param == "sqlite":
        url = f"sqlite:///{out / 'shop.db'}"
    else:
        require_postgres()
        schema = f"rota_test_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f'CREATE SCHEMA "{schema}"')
        url = pg_schema_url(schema)
    setup = rota.App(url)
    setup.migrate()
    setup.close()
    # The tables are the shop's own: create them the way the shop does, in a subprocess
    # bound to this database (the shop reads its URL at import).
    _shop_tables(url, out)
    port = harness.free_port()
    api = harness.start_api(url, out, port)
    instance = Shop(url, port)
    try:
        yield instance
    finally:
        instance.client.close()
        instance.app.close()
        api.stop(timeout=10)
        if schema is not None:
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _shop_tables(url: str, out: Path) -> None:
    import os
    import subprocess
    import sys

    code = "from examples.seatlark import shop; shop.create_tables()"
    env = {**os.environ, "ROTA_DATABASE_URL": url, "SEATLARK_OUT": str(out)}
    subprocess.run([sys.executable, "-c", code], cwd=harness.REPO, env=env, check=True)


def test_an_order_is_saved_with_its_ticket_job_and_a_retry_is_idempotent(shop: Shop) -> None:
    first = shop.post(GOOD)
    assert first.status == 201, first.body
    again = shop.post(GOOD)
    assert again.status == 200 and again.body == first.body  # the same order, the same job
    order = shop.client.request("GET", f"/orders/{first.body['order']}")
    assert order.status == 200
    assert order.body["ref"] == "t-0001" and order.body["job"] == first.body["job"]
    assert order.body["job_state"] == "available" and order.body["status"] == "paid"
    with shop.app.transaction() as conn:
        rows = conn.execute("SELECT COUNT(*) AS n FROM orders WHERE ref = 't-0001'").fetchone()
    assert (rows["n"] if isinstance(rows, dict) else rows[0]) == 1
    job = shop.app.get_job(first.body["job"])
    assert job is not None and job.args == {"order_id": first.body["order"]}


def test_a_name_with_an_apostrophe_and_accents_is_stored_verbatim(shop: Shop) -> None:
    name = "Léa O'Brien-Sørensen"
    response = shop.post({**GOOD, "ref": "t-apostrophe", "customer": name})
    assert response.status == 201, response.body
    found = shop.client.request("GET", "/orders?customer=" + quote("o'brien"))
    assert found.status == 200
    assert [o["customer"] for o in found.body["orders"]] == [name]


def test_a_ref_reused_for_another_order_is_a_conflict(shop: Shop) -> None:
    assert shop.post({**GOOD, "ref": "t-conflict"}).status == 201
    before = shop.stored()
    response = shop.post({**GOOD, "ref": "t-conflict", "quantity": 3})
    assert response.status == 409 and response.body["error"]["field"] == "ref"
    assert shop.stored() == before


NESTED = b"[" * 2000 + b"]" * 2000  # valid JSON, but deeper than the decoder recurses

BAD_BODIES = [
    ("truncated", b'{"ref": "b1", "quantity": ', 400, "malformed_json"),
    ("not json", b"ref=b1&quantity=2", 400, "malformed_json"),
    ("not utf-8", b'{"customer": "\xff\xfe"}', 400, "bad_encoding"),
    ("NaN", b'{"ref": "b1", "quantity": NaN}', 400, "malformed_json"),
    ("duplicate key", b'{"ref": "b1", "ref": "b2"}', 400, "malformed_json"),
    ("deep nesting", NESTED, 400, "malformed_json"),
    ("array", b"[1, 2]", 422, "not_an_object"),
    ("string", b'"order"', 422, "not_an_object"),
    ("empty", b"", 400, "malformed_json"),
]


@pytest.mark.parametrize(
    ("body", "status", "code"), [b[1:] for b in BAD_BODIES], ids=[b[0] for b in BAD_BODIES]
)
def test_malformed_bodies_are_refused(shop: Shop, body: bytes, status: int, code: str) -> None:
    before = shop.stored()
    response = shop.raw(body)
    assert response.status == status, response.body
    assert response.body["error"]["code"] == code
    assert shop.stored() == before


BAD_ORDERS = [
    ("unknown field", {**GOOD, "discount_pct": 100}, "unknown_field", "discount_pct"),
    ("missing field", {k: v for k, v in GOOD.items() if k != "email"}, "missing_field", "email"),
    ("sql in name", {**GOOD, "customer": "Robert'); DROP TABLE orders;--"}, "invalid", "customer"),
    ("sql in email", {**GOOD, "email": "a@b.com' OR '1'='1"}, "invalid", "email"),
    ("sql in ref", {**GOOD, "ref": "x'; DELETE FROM orders; --"}, "invalid", "ref"),
    ("sql in show", {**GOOD, "show": "mira-vale' OR 1=1 --"}, "unknown_show", "show"),
    ("script in name", {**GOOD, "customer": "<script>alert(1)</script>"}, "invalid", "customer"),
    ("null byte", {**GOOD, "customer": "Ada\x00Okafor"}, "invalid", "customer"),
    ("newline", {**GOOD, "customer": "Ada\nOkafor"}, "invalid", "customer"),
    ("wildcard", {**GOOD, "customer": "%"}, "invalid", "customer"),
    ("long name", {**GOOD, "customer": "A" * 101}, "invalid", "customer"),
    ("quantity text", {**GOOD, "quantity": "2"}, "invalid", "quantity"),
    ("quantity bool", {**GOOD, "quantity": True}, "invalid", "quantity"),
    ("quantity float", {**GOOD, "quantity": 2.5}, "invalid", "quantity"),
    ("quantity zero", {**GOOD, "quantity": 0}, "invalid", "quantity"),
    ("quantity negative", {**GOOD, "quantity": -1}, "invalid", "quantity"),
    ("quantity huge", {**GOOD, "quantity": 10**30}, "invalid", "quantity"),
    ("name object", {**GOOD, "customer": {"$ne": None}}, "invalid", "customer"),
    ("email null", {**GOOD, "email": None}, "invalid", "email"),
    ("empty ref", {**GOOD, "ref": ""}, "invalid", "ref"),
]


@pytest.mark.parametrize(
    ("order", "code", "field"), [b[1:] for b in BAD_ORDERS], ids=[b[0] for b in BAD_ORDERS]
)
def test_invalid_orders_are_refused_with_the_field(
    shop: Shop, order: dict[str, object], code: str, field: str
) -> None:
    before = shop.stored()
    response = shop.post(order)
    assert response.status == 422, response.body
    assert response.body["error"]["code"] == code
    assert response.body["error"]["field"] == field
    assert response.body["error"]["message"]
    assert shop.stored() == before


def test_oversized_bodies_are_refused_before_they_are_read(shop: Shop) -> None:
    before = shop.stored()
    big = json.dumps({**GOOD, "customer": "A" * 10_000}).encode()
    assert shop.raw(big).status == 413
    # Without a Content-Length (chunked), the body is cut off as it streams in.
    conn = http.client.HTTPConnection("127.0.0.1", shop.client.port, timeout=10)
    try:
        chunks = iter([b'{"customer": "', b"A" * 3000, b"A" * 3000, b'"}'])
        conn.request(
            "POST",
            "/orders",
            body=chunks,
            headers={"Content-Type": "application/json"},
            encode_chunked=True,
        )
        response = conn.getresponse()
        assert response.status == 413
        assert json.loads(response.read())["error"]["code"] == "too_large"
    finally:
        conn.close()
    assert shop.stored() == before


def test_a_body_that_is_not_json_by_content_type_is_415(shop: Shop) -> None:
    before = shop.stored()
    response = shop.raw(json.dumps(GOOD).encode(), content_type="text/plain")
    assert response.status == 415
    assert shop.stored() == before


BAD_SEARCHES = [
    ("sql in customer", "customer=" + quote("' OR '1'='1")),
    ("comment in customer", "customer=" + quote("Ada'--")),
    ("union", "customer=" + quote("x' UNION SELECT email FROM orders--")),
    ("sql in show", "show=" + quote("mira-vale'; DROP TABLE orders;--")),
    ("sql in status", "status=" + quote("paid' OR 'a'='a")),
    ("sql in limit", "limit=" + quote("1; DROP TABLE orders")),
    ("limit zero", "limit=0"),
    ("limit huge", "limit=100000"),
    ("unknown field", "email=ada%40example.com"),
    ("repeated field", "customer=Ada&customer=Bo"),
    ("wildcard", "customer=" + quote("%")),
]


@pytest.mark.parametrize("query", [b[1] for b in BAD_SEARCHES], ids=[b[0] for b in BAD_SEARCHES])
def test_bad_searches_are_refused(shop: Shop, query: str) -> None:
    before = shop.stored()
    response = shop.client.request("GET", f"/orders?{query}")
    assert response.status == 422, response.body
    assert response.body["error"]["message"]
    assert shop.stored() == before


def test_a_good_search_and_unknown_orders(shop: Shop) -> None:
    assert shop.post({**GOOD, "ref": "t-search", "customer": "Goran Novak"}).status == 201
    found = shop.client.request("GET", "/orders?customer=goran&show=mira-vale&status=paid")
    assert found.status == 200
    assert [o["ref"] for o in found.body["orders"]] == ["t-search"]
    assert shop.client.request("GET", "/orders/987654321").status == 404
    assert shop.client.request("GET", "/orders/1%20OR%201=1").status == 404
    assert shop.client.request("DELETE", "/orders").status == 405
