"""What the demo and the chaos run share: real worker and API processes, a small HTTP
client that places orders (retrying with the same ref), generated customers, and the audit
that counts what the database says happened."""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any
from urllib.parse import parse_qsl, quote, urlencode, urlsplit

import psycopg
from psycopg import sql

REPO = Path(__file__).resolve().parents[2]
APP_PATH = "examples.seatlark.shop:app"

FIRST = ["Ada", "Bo", "Chen", "Dara", "Emeka", "Freya", "Goran", "Hana", "Ivo", "Jun", "Léa"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Sato", "Novak", "Reyes", "O'Brien", "Byrne"]
GOOD_SHOWS = ["nightjar-quartet", "lantern-choir", "harbour-lights", "mira-vale", "static-orchards"]
BROKEN_SHOW = "vanishing-act"


class HarnessError(Exception):
    """Something went wrong that the reader should see in one line."""


# --- databases --------------------------------------------------------------------------------


def with_search_path(url: str, schema: str) -> str:
    """`url` with its search_path (in the libpq `options` parameter) set to `schema`."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    options = re.sub(r"-c\s*search_path=\S+", "", query.get("options", "")).strip()
    query["options"] = f"{options} -csearch_path={schema}".strip()
    return parts._replace(query=urlencode(query, quote_via=quote)).geturl()


def reset_schema(url: str, schema: str) -> str:
    """Drop and recreate `schema` on PostgreSQL; return `url` pointed at it."""
    with psycopg.connect(url, autocommit=True, connect_timeout=5) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    return with_search_path(url, schema)


def reset_sqlite(url: str) -> Path:
    path = Path(urlsplit(url).path[1:])
    for suffix in ("", "-wal", "-shm"):
        path.with_name(path.name + suffix).unlink(missing_ok=True)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def load_shop(url: str, out: Path) -> ModuleType:
    """Import the shop bound to `url`, writing its files under `out` (it reads both from the
    environment at import, as the worker processes do)."""
    os.environ["ROTA_DATABASE_URL"] = url
    os.environ["SEATLARK_OUT"] = str(out)
    from examples.seatlark import shop

    return shop


def short(path: Path) -> str:
    try:
        return str(path.relative_to(Path.cwd()))
    except ValueError:
        return str(path)


# --- processes --------------------------------------------------------------------------------


@dataclass
class Process:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    started: float = field(default_factory=time.monotonic)
    health_port: int | None = None  # a worker's /livez, answering once its handlers exist
    _up: bool = False

    @property
    def alive(self) -> bool:
        return self.proc.poll() is None

    @property
    def up(self) -> bool:
        """True once the worker answers /livez: it is past its imports, and SIGTERM is a
        drain from now on. (Before, the interpreter's default action ends it at once.)"""
        if not self._up and self.health_port is not None and self.alive:
            client = Client(self.health_port, timeout=1.0)
            try:
                self._up = client.request("GET", "/livez").status == 200
            except (OSError, http.client.HTTPException):
                pass
            finally:
                client.close()
        return self._up or self.health_port is None

    def tail(self, lines: int = 15) -> str:
        text = self.log.read_text(errors="replace").strip().splitlines()[-lines:]
        return "\n".join(text)

    def check(self) -> None:
        code = self.proc.poll()
        if code is not None:
            raise HarnessError(f"{self.name} exited with status {code}:\n{self.tail()}")

    def kill(self) -> None:
        """SIGKILL: no grace, no cleanup; its presence ends with it and its jobs are rescued."""
        if self.alive:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait()

    def wait(self, timeout: float) -> int:
        """Wait for the exit status; SIGKILL after `timeout` seconds (reported as -9)."""
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return -9

    def stop(self, timeout: float = 30.0) -> int:
        """SIGTERM: finish or return running jobs within the grace period, then exit.
        A worker still starting is given up to a minute to get there first."""
        deadline = time.monotonic() + 60
        while self.alive and not self.up and time.monotonic() < deadline:
            time.sleep(0.1)
        if self.alive:
            self.proc.send_signal(signal.SIGTERM)
            return self.wait(timeout)
        return self.proc.returncode


def _spawn(name: str, argv: list[str], env: dict[str, str], out: Path) -> Process:
    log = out / f"{name}.log"
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [sys.executable, *argv],
            cwd=REPO,
            env={**os.environ, **env, "PYTHONUNBUFFERED": "1"},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    return Process(name, proc, log)


@dataclass(frozen=True)
class WorkerOptions:
    queues: str = "tickets=8,reports=1"
    lease: float = 2.0
    grace: float = 10.0
    leader_ttl: float = 3.0
    app: str = APP_PATH  # the app the worker loads (the chaos run adds its poison jobs)


def start_worker(
    name: str, url: str, out: Path, options: WorkerOptions, env: dict[str, str] | None = None
) -> Process:
    argv = [
        "-m",
        "rota",
        "worker",
        "--app",
        options.app,
        "--queues",
        options.queues,
        "--lease",
        str(options.lease),
        "--grace",
        str(options.grace),
        "--worker-id",
        name,
        # A killed worker may have been the leader: hand leadership over quickly.
        "--leader-ttl",
        str(options.leader_ttl),
        "--rescue-interval",
        "0.5",
        "--stage-interval",
        "0.2",
        "--log-level",
        "warning",
        "--health-host",
        "127.0.0.1",
        "--health-port",
        str(port := free_port()),
    ]
    worker = _spawn(
        name, argv, {"ROTA_DATABASE_URL": url, "SEATLARK_OUT": str(out), **(env or {})}, out
    )
    worker.health_port = port
    return worker


def one_off(argv: list[str], url: str, out: Path) -> str:
    """Run `python -m rota ARGV` to its end, as a deploy step would; return its output."""
    env = {**os.environ, "ROTA_DATABASE_URL": url, "SEATLARK_OUT": str(out)}
    done = subprocess.run(
        [sys.executable, "-m", "rota", *argv],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise HarnessError(f"rota {' '.join(argv)} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_api(url: str, out: Path, port: int) -> Process:
    argv = ["-m", "examples.seatlark.api", "--port", str(port)]
    api = _spawn("seatlark-api", argv, {"ROTA_DATABASE_URL": url, "SEATLARK_OUT": str(out)}, out)
    client = Client(port)
    try:

        def answering() -> bool:
            api.check()  # fail at once, with its log, if it died starting
            return client.healthy()

        wait_until(answering, "the checkout API to answer", 30)
    finally:
        client.close()
    return api


def wait_until(check: Callable[[], object], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise HarnessError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(0.1)


# --- the HTTP client --------------------------------------------------------------------------


@dataclass
class Response:
    status: int
    body: dict[str, Any]


@dataclass
class Client:
    """One keep-alive connection to the API (use one per thread)."""

    port: int
    host: str = "127.0.0.1"
    timeout: float = 10.0
    _conn: http.client.HTTPConnection | None = None

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> Response:
        if self._conn is None:
            self._conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            self._conn.request(method, path, body=body, headers=headers or {})
            raw = self._conn.getresponse()
            data = raw.read()
        except (OSError, http.client.HTTPException):
            self.close()
            raise
        try:
            parsed = json.loads(data) if data else {}
        except ValueError:
            parsed = {"raw": data.decode(errors="replace")}
        return Response(raw.status, parsed if isinstance(parsed, dict) else {"value": parsed})

    def post_json(self, path: str, value: object) -> Response:
        body = json.dumps(value).encode()
        return self.request("POST", path, body, {"Content-Type": "application/json"})

    def healthy(self) -> bool:
        try:
            return self.request("GET", "/health").status == 200
        except (OSError, http.client.HTTPException):
            return False

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None


def make_order(rng: random.Random, n: int, *, broken: bool, run: str) -> dict[str, Any]:
    return {
        "ref": f"{run}-{n:06d}",
        "customer": f"{rng.choice(FIRST)} {rng.choice(LAST)}",
        "email": f"fan{n}@example.com",
        "show": BROKEN_SHOW if broken else rng.choice(GOOD_SHOWS),
        "quantity": rng.randint(1, 4),
    }


@dataclass
class Placement:
    """What the client was told: the refs confirmed, and how many tries that took."""

    confirmed: dict[str, int] = field(default_factory=dict)  # ref -> order id
    retries: int = 0
    replays: int = 0  # retries answered 200: the order had been placed already


def place(client: Client, order: dict[str, Any], placement: Placement, deadline: float) -> None:
    """POST one order until it is confirmed; connection errors and 503 are retried with the
    same ref, so a retry after a lost answer cannot place the order twice."""
    while True:
        try:
            response = client.post_json("/orders", order)
        except (OSError, http.client.HTTPException):
            response = None
        if response is not None and response.status in (200, 201):
            placement.confirmed[order["ref"]] = int(response.body["order"])
            placement.replays += response.status == 200
            return
        if response is not None and response.status != 503:
            raise HarnessError(f"order {order['ref']} refused: {response.status} {response.body}")
        if time.monotonic() > deadline:
            raise HarnessError(f"order {order['ref']} not placed before the deadline")
        placement.retries += 1
        time.sleep(0.2)


# --- the audit --------------------------------------------------------------------------------

TERMINAL = ("completed", "discarded", "cancelled")


@dataclass(frozen=True)
class Audit:
    """What the database says, next to what the clients were told."""

    orders: int
    confirmed: int
    lost: int  # confirmed to a client, missing from the database
    broken: int  # orders for the show without a seat map
    tickets: int
    duplicate_tickets: int
    unticketed: int  # good orders with no ticket, or not marked ticketed
    orders_without_job: int
    mails: int
    mail_calls: int
    duplicate_mails: int
    pdfs: int
    dead_letters: int
    not_terminal: int
    lost_attempts: int  # attempts cut off by a dead worker or a lost lease

    @property
    def ok(self) -> bool:
        return (
            self.lost == 0
            and self.duplicate_tickets == 0
            and self.duplicate_mails == 0
            and self.unticketed == 0
            and self.orders_without_job == 0
            and self.not_terminal == 0
            and self.tickets == self.orders - self.broken
            and self.mails == self.tickets
            and self.pdfs == self.tickets
            and self.dead_letters == self.broken
        )

    def failures(self) -> list[str]:
        checks = {
            "lost orders": self.lost == 0,
            "duplicate tickets": self.duplicate_tickets == 0,
            "duplicate mails": self.duplicate_mails == 0,
            "good orders without a ticket": self.unticketed == 0,
            "orders without a ticket job": self.orders_without_job == 0,
            "jobs not terminal": self.not_terminal == 0,
            "one ticket per good order": self.tickets == self.orders - self.broken,
            "one mail per ticket": self.mails == self.tickets,
            "one PDF per ticket": self.pdfs == self.tickets,
            "dead letters = broken orders": self.dead_letters == self.broken,
        }
        return [name for name, passed in checks.items() if not passed]


def audit(shop: ModuleType, confirmed: dict[str, int], out: Path) -> Audit:
    s = shop.scalar
    stored = set()
    with shop.app.transaction() as conn:
        for (ref,) in shop.fetch(conn, "SELECT ref FROM orders"):
            stored.add(ref)
        codes = [c for (c,) in shop.fetch(conn, "SELECT code FROM tickets")]
    pdf_dir = out / "tickets"
    pdfs = sum(1 for c in codes if (pdf_dir / f"{c}.pdf").is_file())
    return Audit(
        orders=len(stored),
        confirmed=len(confirmed),
        lost=sum(1 for ref in confirmed if ref not in stored),
        broken=s("SELECT COUNT(*) FROM orders WHERE show = ?", [BROKEN_SHOW]),
        tickets=len(codes),
        duplicate_tickets=s("SELECT COUNT(*) - COUNT(DISTINCT order_id) FROM tickets"),
        unticketed=s(
            "SELECT COUNT(*) FROM orders o LEFT JOIN tickets t ON t.order_id = o.id "
            "WHERE o.show <> ? AND (t.id IS NULL OR o.status <> 'ticketed' "
            "OR o.ticket_code <> t.code)",
            [BROKEN_SHOW],
        ),
        orders_without_job=s(
            "SELECT COUNT(*) FROM orders o LEFT JOIN rota_jobs j ON j.id = o.job_id "
            "WHERE j.id IS NULL"
        ),
        mails=s("SELECT COUNT(*) FROM mailbox"),
        mail_calls=s("SELECT COUNT(*) FROM mail_calls"),
        duplicate_mails=s("SELECT COUNT(*) - COUNT(DISTINCT order_id) FROM mailbox"),
        pdfs=pdfs,
        dead_letters=s(
            "SELECT COUNT(*) FROM rota_jobs WHERE task = ? AND state = 'discarded'",
            [shop.make_ticket.name],
        ),
        not_terminal=s(
            "SELECT COUNT(*) FROM rota_jobs WHERE state NOT IN (?, ?, ?)", list(TERMINAL)
        ),
        lost_attempts=_lost_attempts(shop),
    )


def _lost_attempts(shop: ModuleType) -> int:
    """Attempts that ended without an outcome from their own worker (killed, lease lost)."""
    from rota import Outcome

    total, before = 0, None
    while True:
        jobs = shop.app.list_jobs(task=shop.make_ticket.name, limit=10_000, before_id=before)
        if not jobs:
            return total
        total += sum(1 for j in jobs for a in j.history if a.outcome is Outcome.LOST)
        before = min(j.id for j in jobs)
