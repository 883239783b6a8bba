"""Run one measurement in a fresh (spawned) process, so that the worker under test owns
its interpreter and GIL, as it does in production, and never inherits the parent's
connections or threads."""

from __future__ import annotations

import multiprocessing
import multiprocessing.connection
import traceback
from collections.abc import Callable
from typing import Any

from bench.db import BenchError

SPAWN = multiprocessing.get_context("spawn")


def _entry(
    target: Callable[..., Any], conn: multiprocessing.connection.Connection, args: tuple[Any, ...]
) -> None:
    try:
        value = target(*args)
    except BaseException:
        conn.send(("error", traceback.format_exc()))
    else:
        conn.send(("ok", value))
    finally:
        conn.close()


def run_in_child(target: Callable[..., Any], *args: Any, timeout: float) -> Any:
    """`target(*args)` in a spawned process; its return value (picklable) or BenchError."""
    receiver, sender = SPAWN.Pipe(duplex=False)
    proc = SPAWN.Process(target=_entry, args=(target, sender, args), daemon=True)
    proc.start()
    sender.close()
    try:
        if not receiver.poll(timeout):
            raise BenchError(f"{target.__name__} did not finish within {timeout:.0f}s")
        status, value = receiver.recv()
    except EOFError:
        raise BenchError(f"{target.__name__} died (exit code {proc.exitcode})") from None
    finally:
        receiver.close()
        stop(proc)
    if status == "error":
        raise BenchError(f"{target.__name__} failed in the child process:\n{value}")
    return value


def stop(proc: multiprocessing.process.BaseProcess, timeout: float = 15.0) -> None:
    """Wait for `proc` to exit; kill it (this one process) if it does not."""
    proc.join(timeout)
    if proc.is_alive():
        proc.kill()
        proc.join()
