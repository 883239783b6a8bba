"""The shop's tasks in-process on both dialects: checkout commits or rolls back the order
with its job, a ticket job run twice still makes one ticket, PDF and mail, a broken order is
dead-lettered after its attempts, and the payout report is safe to run twice."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from rota.testing import drain


@pytest.fixture
def shop(
    database_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[ModuleType]:
    """The shop module bound to this test's database (it reads the URL at import)."""
    monkeypatch.setenv("ROTA_DATABASE_URL", database_url)
    monkeypatch.setenv("SEATLARK_OUT", str(tmp_path))
    monkeypatch.setenv("SEATLARK_WORK_SECONDS", "0")
    from examples.seatlark import shop as module

    module = importlib.reload(module)
    module.app.migrate()
    module.create_tables()
    try:
        yield module
    finally:
        module.app.close()


def place(shop: ModuleType, ref: str, show: str = "mira-vale") -> int:
    with shop.app.transaction() as conn:
        placed = shop.checkout(
            conn, ref=ref, customer="Ada Okafor", email="ada@example.com", show=show, quantity=2
        )
    return int(placed.order_id)


def test_checkout_commits_or_rolls_back_the_order_with_its_job(shop: ModuleType) -> None:
    with pytest.raises(RuntimeError), shop.app.transaction() as conn:
        shop.checkout(
            conn,
            ref="r-1",
            customer="Bo Sato",
            email="bo@example.com",
            show="mira-vale",
            quantity=1,
        )
        raise RuntimeError("payment declined after the insert")
    assert shop.scalar("SELECT COUNT(*) FROM orders") == 0
    assert shop.app.list_jobs() == []
    order_id = place(shop, "r-1")
    (job,) = shop.app.list_jobs()
    assert job.args == {"order_id": order_id} and job.key == f"order-{order_id}"
    assert place(shop, "r-1") == order_id  # the same ref again: the same order, no new job
    assert len(shop.app.list_jobs()) == 1


def test_a_ticket_job_run_twice_makes_one_ticket_pdf_and_mail(
    shop: ModuleType, tmp_path: Path
) -> None:
    order_id = place(shop, "r-2")
    drain(shop.app)  # completes in ctx.transaction(), which drain does not count
    (job,) = shop.app.list_jobs(state="completed")
    shop.app.retry_job(job.id)  # an operator runs it again, as a crash would
    drain(shop.app)
    assert shop.app.list_jobs(state="completed") != []
    assert shop.scalar("SELECT COUNT(*) FROM tickets") == 1
    assert shop.scalar("SELECT COUNT(*) FROM mailbox") == 1
    (code,) = [p.stem for p in (tmp_path / "tickets").glob("*.pdf")]
    assert code.startswith(f"SL-{order_id:06d}-")
    assert (tmp_path / "tickets" / f"{code}.pdf").read_bytes().startswith(b"%PDF-")
    with shop.app.transaction() as conn:
        rows = shop.fetch(conn, "SELECT status, ticket_code FROM orders WHERE id = ?", [order_id])
    assert rows == [("ticketed", code)]


def test_an_order_without_a_seat_map_is_dead_lettered(shop: ModuleType) -> None:
    place(shop, "r-3", show="vanishing-act")
    report = drain(shop.app, with_scheduled=True)
    assert report.discarded == 1 and report.retried == 4
    (job,) = shop.app.list_jobs(state="discarded")
    assert job.attempt == 5
    assert job.history[-1].error_type == "examples.seatlark.shop.SeatMapError"
    assert shop.scalar("SELECT COUNT(*) FROM tickets") == 0


def test_the_payout_report_is_scheduled_and_safe_to_run_twice(
    shop: ModuleType, tmp_path: Path
) -> None:
    (schedule,) = shop.app.schedules.values()
    assert (schedule.spec.expression, schedule.spec.timezone) == ("0 3 * * *", "Europe/Berlin")
    assert str(schedule.spec.concurrency.value).lower() == "forbid"
    place(shop, "r-4")
    drain(shop.app, ["tickets"])
    shop.app.sync_schedules()
    runs = [shop.app.trigger_schedule(shop.payout_report.name) for _ in range(2)]
    assert drain(shop.app, ["reports"]).completed == 2
    results = [shop.app.get_job(r.job_id).result for r in runs]
    assert sorted(r["first_run"] for r in results) == [False, True]
    for result in results:
        del result["first_run"]
    assert results[0] == results[1]
    assert results[0]["orders"] == 1 and results[0]["cents"] == 2 * 2900
    assert shop.scalar("SELECT COUNT(*) FROM payout_reports") == 1
    (path,) = (tmp_path / "reports").glob("payout-*.json")
    assert path.name == f"payout-{results[0]['date']}.json"


def test_checkout_refuses_an_unknown_show_before_writing(shop: ModuleType) -> None:
    with pytest.raises(KeyError), shop.app.transaction() as conn:
        shop.checkout(
            conn, ref="r-5", customer="Bo Sato", email="bo@example.com", show="nope", quantity=1
        )
    assert shop.scalar("SELECT COUNT(*) FROM orders") == 0
    assert shop.app.list_jobs() == []  # nor its ticket job, from the same transaction
