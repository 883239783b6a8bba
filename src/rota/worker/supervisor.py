"""Supervisor for `rota worker --processes N`: starts N worker processes, passes
SIGTERM/SIGINT on to them as a drain request (a second one as stop now), restarts one
that crashes, and exits when all have drained."""

from __future__ import annotations

import logging
import signal
import subprocess
import time
from types import FrameType

log = logging.getLogger("rota.supervisor")

EXIT_SCHEMA = 3  # a child refused the schema: restarting would not help
# A child left because every one of its slots was held by a hung thread (Python cannot
# stop a thread): a fresh process takes its place, as Celery's hard time limit does.
EXIT_HUNG = 4

# The children are asked to drain with DRAIN_SIGNAL and to stop now with HALT_SIGNAL, never
# with the SIGINT or SIGTERM the supervisor got: the same signal often reaches them directly
# too (Ctrl-C goes to the terminal's whole process group, systemd signals the whole control
# group), and a second SIGINT would mean "stop now" to them. A drain request is idempotent.
DRAIN_SIGNAL = signal.SIGUSR1
HALT_SIGNAL = signal.SIGUSR2
REQUESTS = frozenset({DRAIN_SIGNAL, HALT_SIGNAL})


def supervise(argv: list[str], processes: int) -> int:
    # Children inherit the blocked mask across exec: a request sent while one is still
    # starting waits until it can handle it, instead of killing it (the default action).
    signal.pthread_sigmask(signal.SIG_BLOCK, REQUESTS)
    children: list[subprocess.Popen[bytes]] = [subprocess.Popen(argv) for _ in range(processes)]
    restarts = [0] * processes
    stopping = False
    # Children that had left before the stop and were not started again because of it:
    # their old exit status is no reason to fail the stop.
    replaced_by_stop: set[int] = set()

    def forward(signum: int, _frame: FrameType | None) -> None:
        nonlocal stopping
        request = HALT_SIGNAL if stopping else DRAIN_SIGNAL
        stopping = True
        for child in children:
            if child.poll() is None:
                child.send_signal(request)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    log.info("supervising %d worker processes: %s", processes, [c.pid for c in children])
    while True:
        done = [child.poll() for child in children]
        # All gone at once ends the supervisor (a bad app fails every child alike),
        # except when every one left hung: those are replaced like any other.
        if all(code is not None for code in done) and (
            stopping or any(code != EXIT_HUNG for code in done)
        ):
            codes = [c.returncode for i, c in enumerate(children) if i not in replaced_by_stop]
            if EXIT_SCHEMA in codes:
                # The others were stopped because of it (maybe by SIGTERM before their
                # handlers were installed): the schema is the reason to report.
                return EXIT_SCHEMA
            # A child that left hung had returned its jobs: as clean as a drain.
            if stopping and all(c in (0, EXIT_HUNG) for c in codes):
                return 0
            # A child killed by a signal reports -N; exit like a shell would: 128 + N.
            return max(128 - c if c < 0 else c for c in codes)
        for i, child in enumerate(children):
            code = child.poll()
            if code is None or stopping:
                continue
            if code == EXIT_SCHEMA:
                log.error("worker %d refused the schema; stopping all", child.pid)
                forward(signal.SIGTERM, None)
                break
            restarts[i] += 1
            delay = min(0.5 * 2 ** min(restarts[i], 6), 30.0)
            if code == EXIT_HUNG:
                log.warning(
                    "worker %d left with all its slots hung; restarting in %.1fs", child.pid, delay
                )
            else:
                log.warning("worker %d exited with %s; restarting in %.1fs", child.pid, code, delay)
            time.sleep(delay)
            if stopping:
                replaced_by_stop.add(i)
            else:
                children[i] = subprocess.Popen(argv)
        time.sleep(0.2)
