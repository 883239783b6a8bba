"""What `rota` prints (#19), as a user's shell runs it: through a pipe (tab-separated values)
and on an 80-column terminal (a real pseudo-terminal), for every listing, with user text
that holds rich markup, NUL and right-to-left characters."""

from __future__ import annotations

import asyncio
import os
import pty
import re
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.cells import cell_len

import rota
from rota.security.encryption import generate_key
from tests.helpers import fast_settings, run_worker_until

pytestmark = pytest.mark.e2e

# Markup that broke `rota sagas ls` (rich.errors.MarkupError), a NUL (stored escaped), a
# right-to-left override that would flip the rest of the line, and Hebrew (kept as it is).
NASTY = "price field [/usd] missing \x00 \u202eevil\u202c שלום [bold]x[/bold] " + "z" * 80
KEY = "order-[/usd]-שלום"


def finished(app: rota.App, ids: list[int]) -> bool:
    return all((j := app.get_job(i)) is not None and j.state.finished for i in ids)


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """One SQLite database holding a failed job, saga, batch, workflow and replay."""
    path = tmp_path_factory.mktemp("cli-output") / "rota.db"
    app = rota.App(f"sqlite:///{path}")
    app.migrate()

    @app.task(max_attempts=1)
    def charge(order: str) -> None:
        raise ValueError(NASTY)

    saga = rota.Saga("fulfilment", max_attempts=1)

    @saga.step
    def reserve(data: dict[str, Any]) -> None:
        raise ValueError(NASTY)

    app.sagas.register(saga)
    wf = rota.Workflow("nightly")
    wf.step(charge)
    app.workflows.register(wf)

    job = charge.enqueue(order="order-1817")
    app.sagas.start(saga, key=KEY, data={"note": NASTY.replace("\x00", "")})
    batch = app.batch(
        charge, items=[{"order": "b-1"}], parallelism=1, name="bills-[/x]", backoff_limit=0
    )
    run = app.workflows.start(wf, args={"order": "w-1"}, key=KEY)

    def done() -> bool:
        return (
            finished(app, [job.id])
            and app.sagas.get(KEY).status.finished
            and app.batches.get(batch.id).finished
            and app.workflows.get(run.id).state.finished
        )

    settings = fast_settings(queues={"default": 4})
    asyncio.run(run_worker_until(rota.Worker(app, settings), done, timeout=30))
    app.dlq.replay(ids=(job.id,), reason="retry [/usd] \u202eplease", limit=10)
    app.close()
    yield {"url": f"sqlite:///{path}", "job": job.id, "batch": batch.id, "run": run.id}


def listings(world: dict[str, Any]) -> list[list[str]]:
    return [
        ["jobs", "ls"],
        ["jobs", "show", str(world["job"])],
        ["queues", "ls"],
        ["dlq", "ls"],
        ["dlq", "show", str(world["job"])],
        ["dlq", "replays"],
        ["sagas", "ls"],
        ["sagas", "show", KEY],
        ["batches", "ls"],
        ["batches", "show", str(world["batch"])],
        ["workflows", "ls"],
        ["workflows", "show", str(world["run"])],
    ]


def env_for(world: dict[str, Any], **extra: str) -> dict[str, str]:
    env = dict(os.environ, ROTA_DATABASE_URL=world["url"], **extra)
    env.pop("ROTA_APP", None)
    return env


def on_terminal(
    argv: list[str], env: dict[str, str], *, both: bool = False, status: int = 0
) -> tuple[int, str]:
    """Run `argv` with its stdout (and with `both` its stderr) on a pseudo-terminal; its
    exit status and output."""
    main, child = pty.openpty()
    stderr = child if both else subprocess.PIPE
    proc = subprocess.Popen(argv, stdout=child, stderr=stderr, env=env)
    os.close(child)
    chunks = []
    while True:
        ready, _, _ = select.select([main], [], [], 30)
        if not ready:
            proc.kill()
            raise AssertionError(f"{argv} printed nothing for 30 s")
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the child closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(main)
    proc.wait(30)
    err = ""
    if proc.stderr is not None:
        err = proc.stderr.read().decode()
        proc.stderr.close()
    assert proc.returncode == status, err
    out = b"".join(chunks).decode().replace("\r\n", "\n")
    return proc.returncode, re.sub(r"\x1b\[[0-9;]*m", "", out)  # styles are not width


def test_every_listing_through_a_pipe_is_tab_separated(world: dict[str, Any]) -> None:
    for args in listings(world):
        done = subprocess.run(
            [sys.executable, "-m", "rota", *args],
            capture_output=True,
            text=True,
            env=env_for(world),
            timeout=60,
            check=False,
        )
        assert done.returncode == 0, (args, done.stderr)
        out = done.stdout
        assert "\u202e" not in out and "\x00" not in out, args  # shown escaped
        assert "\x1b[" not in out, args  # no colours into a pipe
        if args[1] == "ls" or args[1] == "replays":
            header, *rows = out.rstrip("\n").split("\n")
            width = len(header.split("\t"))
            assert width > 2 and all(len(r.split("\t")) == width for r in rows), (args, out)
            assert not any("…" in r for r in rows), args  # a pipe gets everything
    dlq = subprocess.run(
        [sys.executable, "-m", "rota", "dlq", "ls"],
        capture_output=True,
        text=True,
        env=env_for(world),
        check=True,
    ).stdout
    # The whole error, NUL and override escaped, markup as text.
    assert "price field [/usd] missing \\\\x00 \\u202eevil\\u202c שלום [bold]x[/bold] z" in dlq
    assert dlq.rstrip().endswith("z" * 80)
    sagas = subprocess.run(
        [sys.executable, "-m", "rota", "sagas", "ls"],
        capture_output=True,
        text=True,
        env=env_for(world),
        check=True,
    ).stdout
    assert sagas.splitlines()[0] == "key\tsaga\tstatus\tstep\tupdated (UTC)\terror"
    assert sagas.splitlines()[1].startswith(f"{KEY}\tfulfilment\t")


def test_every_listing_fits_80_columns_without_cutting_a_header(world: dict[str, Any]) -> None:
    env = env_for(world, COLUMNS="80", LINES="50", TERM="xterm", NO_COLOR="1")
    for args in listings(world):
        _, out = on_terminal([sys.executable, "-m", "rota", *args], env)
        lines = out.rstrip("\n").split("\n")
        assert "\u202e" not in out and "\x00" not in out, args
        if args[1] in ("ls", "replays"):
            too_wide = [line for line in lines if cell_len(line) > 80]
            assert not too_wide, (args, too_wide)
            header = lines[0].split()
            assert not [word for word in header if "…" in word], (args, lines[0])
        if args[:2] == ["dlq", "ls"]:
            rows = [line for line in lines if "ValueError" in line]
            assert rows and all(r.rstrip().endswith("…") for r in rows)  # cut, and says so
            assert "last error" in lines[0]
        if args[:2] == ["sagas", "ls"]:
            assert KEY in out and "compensated" in out  # markup in a key and an error: no crash
    _, wide = on_terminal([sys.executable, "-m", "rota", "dlq", "ls", "--wide"], env)
    assert "z" * 40 in wide.replace("\n", "").replace(" ", "")  # --wide: all of it, wrapped
    assert "…" not in wide


def test_read_only_commands_refuse_a_missing_sqlite_file(tmp_path: Path) -> None:
    missing = tmp_path / "typo.db"
    for args in (
        ["jobs", "ls", "--database-url", f"sqlite:///{missing}"],
        ["dlq", "ls", "--database-url", f"sqlite:///{missing}"],
        ["db", "copy", "--from", f"sqlite:///{missing}", "--to", "postgresql://127.0.0.1/x"],
    ):
        done = subprocess.run(
            [sys.executable, "-m", "rota", *args],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, done.stderr
        assert f"no such file: {missing}" in done.stderr
        assert not missing.exists()  # never created


def test_db_copy_and_rotate_key_draw_progress_bars_on_a_terminal(
    world: dict[str, Any], pg_url: str
) -> None:
    env = env_for(world, COLUMNS="100", TERM="xterm", NO_COLOR="1")
    argv = [sys.executable, "-m", "rota", "db", "copy", "--from", world["url"], "--to", pg_url]
    _, out = on_terminal(argv, env, both=True)
    assert "rota_jobs" in out and "━" in out  # a bar per table, on stderr
    assert "rota_jobs" in out.split("copied ")[-1]  # then the summary
    env["ROTA_ENCRYPTION_KEYS"] = generate_key()
    argv = [sys.executable, "-m", "rota", "db", "rotate-key", "--database-url", world["url"]]
    _, out = on_terminal(argv, env, both=True)
    assert "jobs" in out and "schedules" in out and "resealed 0" in out
    piped = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
    assert "━" not in piped.stderr  # no bars into a pipe or a log


def test_scale_hint_on_an_empty_queue_suggests_no_target(world: dict[str, Any]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "rota", "scale-hint", "--queue", "idle"],
        capture_output=True,
        text=True,
        env=env_for(world),
        check=True,
    )
    assert "targetQueryValue that asks" not in done.stdout
    assert "no targetQueryValue to suggest" in done.stdout
