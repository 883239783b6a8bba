"""The partition tests' TCP proxy (tests/proxy.py): it forwards, black-holes both ways
with the sockets open (bytes sent during the cut arrive after the heal), refuses, and
resets the connections it holds."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator

import pytest

from tests.proxy import TcpProxy


@pytest.fixture
def echo() -> Iterator[tuple[str, int]]:
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(10)

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            threading.Thread(target=_echo, args=(conn,), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()
    yield server.getsockname()[:2]
    server.close()


def _echo(conn: socket.socket) -> None:
    with conn, contextlib.suppress(OSError):  # the proxy's reset ends it
        while data := conn.recv(4096):
            conn.sendall(data)


def test_forward_blackhole_heal_and_reset(echo: tuple[str, int]) -> None:
    with TcpProxy(echo) as proxy:
        sock = socket.create_connection((proxy.host, proxy.port), timeout=2)
        sock.sendall(b"one")
        assert sock.recv(16) == b"one"

        proxy.blackhole()
        sock.sendall(b"two")  # accepted by the kernel: no error, no answer
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):
            sock.recv(16)
        late = socket.create_connection((proxy.host, proxy.port), timeout=2)
        late.sendall(b"new")  # a new connection is accepted but nothing passes either
        late.settimeout(0.3)
        with pytest.raises(TimeoutError):
            late.recv(16)

        proxy.forward()  # healed: what waited arrives, late
        sock.settimeout(2)
        assert sock.recv(16) == b"two"
        late.settimeout(2)
        assert late.recv(16) == b"new"

        assert proxy.reset() == 2
        with pytest.raises((ConnectionResetError, ConnectionAbortedError)):
            sock.sendall(b"x")
            sock.recv(16)
            sock.sendall(b"x")  # the second send surfaces the RST on some kernels

        proxy.refuse()
        # The reset may come while connecting or on the first read, as the kernel has it.
        with pytest.raises((ConnectionResetError, ConnectionAbortedError)):
            refused = socket.create_connection((proxy.host, proxy.port), timeout=2)
            refused.settimeout(2)
            try:
                refused.recv(16)
            finally:
                refused.close()
        for s in (sock, late):
            s.close()
