"""A TCP proxy on the standard library for partition tests and the chaos command: it
forwards, black-holes both directions while keeping every socket open (what a cut link, a
NAT timeout or a paused VM looks like to both ends), refuses new connections, and resets
the connections it holds.

    proxy = TcpProxy(("127.0.0.1", 5432)).start()
    url = proxy.url("postgresql://postgres@127.0.0.1:5432/test")
    proxy.blackhole()   # nothing passes; bytes wait in the kernel buffers, nothing errors
    proxy.forward()     # healed: what was waiting is delivered, late
    proxy.reset()       # every connection held gets a TCP RST

    python -m tests.proxy --upstream 127.0.0.1:5432 --listen 127.0.0.1:6432
    (then `echo blackhole | nc -q0 127.0.0.1 <control port>`: forward, blackhole, mute,
    refuse, reset)
"""

from __future__ import annotations

import argparse
import contextlib
import queue
import selectors
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit

FORWARD = "forward"
BLACKHOLE = "blackhole"  # accept, hold, pass nothing; sockets stay open
REFUSE = "refuse"  # new connections are reset at once; held ones keep passing
MUTE = "mute"  # requests pass, answers are held: a reply that arrives late
MODES = (FORWARD, BLACKHOLE, REFUSE, MUTE)
# Bytes held per direction before the proxy stops reading that side (back-pressure).
BUFFER_LIMIT = 1 << 20


@dataclass(eq=False)
class _Pipe:
    client: socket.socket
    upstream: socket.socket
    to_upstream: bytearray = field(default_factory=bytearray)
    to_client: bytearray = field(default_factory=bytearray)
    closing: bool = False
    unparsed: bytearray = field(default_factory=bytearray)  # server bytes being filtered


def _hard_close(sock: socket.socket) -> None:
    """Close with SO_LINGER 0: the peer gets a RST, not a FIN."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.close()


class TcpProxy:
    """One thread, one selector: every socket is non-blocking, so a black hole never
    blocks the proxy itself, and a mode change takes effect within one turn (~20 ms)."""

    def __init__(
        self, upstream: tuple[str, int], listen: tuple[str, int] = ("127.0.0.1", 0)
    ) -> None:
        self.upstream = upstream
        self._listener = socket.create_server(listen, reuse_port=False)
        self._listener.setblocking(False)
        self.host, self.port = self._listener.getsockname()[:2]
        self.mode = FORWARD
        self._pipes: list[_Pipe] = []
        self._commands: queue.Queue[tuple[Callable[[], None], threading.Event]] = queue.Queue()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="tcp-proxy", daemon=True)
        self.accepted = 0
        self.resets = 0
        # Drop PostgreSQL NotificationResponse messages on their way to the client, as a
        # transaction-mode pooler in effect does (set it before the client connects; the
        # stream is parsed, so it needs sslmode=disable and gssencmode=disable).
        self.drop_notifications = False
        self.dropped = 0

    # --- control (any thread) ---------------------------------------------------------

    def start(self) -> TcpProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        for pipe in self._pipes:
            _hard_close(pipe.client)
            _hard_close(pipe.upstream)
        self._pipes.clear()
        with contextlib.suppress(OSError):
            self._listener.close()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def forward(self) -> None:
        self._run(lambda: self._set_mode(FORWARD))

    def blackhole(self) -> None:
        """Pass nothing in either direction and keep every socket open: no error reaches
        either end; what was sent waits (in buffers) until forward() or reset()."""
        self._run(lambda: self._set_mode(BLACKHOLE))

    def mute(self) -> None:
        """Pass what the clients send, hold what the server answers (until forward())."""
        self._run(lambda: self._set_mode(MUTE))

    def refuse(self) -> None:
        """Reset new connections at once (a peer that answers with RST)."""
        self._run(lambda: self._set_mode(REFUSE))

    def reset(self) -> int:
        """Send a RST to both ends of every connection held; returns how many."""
        count: list[int] = [0]

        def do() -> None:
            count[0] = len(self._pipes)
            for pipe in self._pipes:
                _hard_close(pipe.client)
                _hard_close(pipe.upstream)
            self._pipes.clear()
            self.resets += count[0]

        self._run(do)
        return count[0]

    @property
    def connections(self) -> int:
        return len(self._pipes)

    def url(self, database_url: str) -> str:
        """`database_url` with its host and port pointing at this proxy."""
        parts = urlsplit(database_url)
        netloc = parts.netloc.rpartition("@")
        auth = netloc[0] + "@" if netloc[1] else ""
        return urlunsplit(parts._replace(netloc=f"{auth}{self.host}:{self.port}"))

    def _set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(f"mode is one of {MODES}, not {mode!r}")
        self.mode = mode

    def _run(self, func: Callable[[], None]) -> None:
        """Run `func` on the proxy's thread (it owns the sockets) and wait for it."""
        if not self._thread.is_alive():
            func()
            return
        done = threading.Event()
        self._commands.put((func, done))
        if not done.wait(timeout=5):
            raise TimeoutError("the proxy thread did not answer")

    # --- the loop (proxy thread) ------------------------------------------------------

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        try:
            while not self._stop.is_set():
                while not self._commands.empty():
                    func, done = self._commands.get_nowait()
                    try:
                        func()
                    finally:
                        done.set()
                self._register(sel)
                for key, events in sel.select(timeout=0.02):
                    if key.fileobj is self._listener:
                        self._accept()
                    else:
                        pipe, side = key.data
                        self._pump(pipe, side, events)
                self._pipes = [p for p in self._pipes if not p.closing]
        finally:
            sel.close()

    def _register(self, sel: selectors.BaseSelector) -> None:
        for key in list(sel.get_map().values()):
            sel.unregister(key.fileobj)
        sel.register(self._listener, selectors.EVENT_READ, None)
        if self.mode == BLACKHOLE:
            return  # neither read nor write: the bytes wait where they are
        for pipe in self._pipes:
            for sock, inbox, outbox, side in (
                (pipe.client, pipe.to_upstream, pipe.to_client, "client"),
                (pipe.upstream, pipe.to_client, pipe.to_upstream, "upstream"),
            ):
                events = 0
                if len(inbox) < BUFFER_LIMIT:
                    events |= selectors.EVENT_READ
                if outbox and not (self.mode == MUTE and side == "client"):
                    events |= selectors.EVENT_WRITE
                if events:
                    sel.register(sock, events, (pipe, side))

    def _accept(self) -> None:
        try:
            client, _ = self._listener.accept()
        except BlockingIOError:
            return
        self.accepted += 1
        if self.mode == REFUSE:
            _hard_close(client)
            return
        try:
            upstream = socket.create_connection(self.upstream, timeout=5)
        except OSError:
            _hard_close(client)
            return
        client.setblocking(False)
        upstream.setblocking(False)
        self._pipes.append(_Pipe(client, upstream))

    def _pump(self, pipe: _Pipe, side: str, events: int) -> None:
        if pipe.closing:
            return
        if side == "client":
            sock, inbox, outbox = pipe.client, pipe.to_upstream, pipe.to_client
        else:
            sock, inbox, outbox = pipe.upstream, pipe.to_client, pipe.to_upstream
        try:
            if events & selectors.EVENT_READ:
                data = sock.recv(65536)
                if not data:  # one end closed: close the other once its bytes are out
                    self._close(pipe)
                    return
                if side == "upstream" and self.drop_notifications:
                    self._filter(pipe, data)
                else:
                    inbox.extend(data)
            if events & selectors.EVENT_WRITE and outbox:
                sent = sock.send(outbox)
                del outbox[:sent]
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._close(pipe, hard=True)

    def _filter(self, pipe: _Pipe, data: bytes) -> None:
        """Pass the server's messages on whole, except notifications ('A')."""
        pending = pipe.unparsed
        pending.extend(data)
        while len(pending) >= 5:
            size = 1 + int.from_bytes(pending[1:5], "big")
            if len(pending) < size:
                break
            if pending[0] == ord("A"):
                self.dropped += 1
            else:
                pipe.to_client.extend(pending[:size])
            del pending[:size]

    def _close(self, pipe: _Pipe, hard: bool = False) -> None:
        pipe.closing = True
        for sock, rest in ((pipe.client, pipe.to_client), (pipe.upstream, pipe.to_upstream)):
            if hard:
                _hard_close(sock)
                continue
            with contextlib.suppress(OSError):
                sock.setblocking(True)
                sock.settimeout(0.5)
                if rest:
                    sock.sendall(rest)
            with contextlib.suppress(OSError):
                sock.close()


def _address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host or "127.0.0.1", int(port)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.proxy", description=__doc__)
    parser.add_argument("--upstream", required=True, help="host:port to forward to")
    parser.add_argument("--listen", default="127.0.0.1:0", help="host:port to listen on")
    parser.add_argument("--control", default="127.0.0.1:0", help="host:port for commands")
    args = parser.parse_args(argv)
    proxy = TcpProxy(_address(args.upstream), _address(args.listen)).start()
    control = socket.create_server(_address(args.control))
    print(
        f"proxy {proxy.host}:{proxy.port} -> {args.upstream}; "
        f"control {control.getsockname()[0]}:{control.getsockname()[1]}",
        flush=True,
    )
    actions: dict[str, Callable[[], object]] = {
        FORWARD: proxy.forward,
        BLACKHOLE: proxy.blackhole,
        MUTE: proxy.mute,
        REFUSE: proxy.refuse,
        "reset": proxy.reset,
    }
    try:
        while True:
            conn, _ = control.accept()
            with conn:
                word = conn.recv(64).decode(errors="replace").strip()
                action = actions.get(word)
                if action is None:
                    conn.sendall(f"unknown: {word!r}\n".encode())
                    continue
                result = action()
                conn.sendall(f"{time.time():.3f} {word} {result or ''}\n".encode())
    except KeyboardInterrupt:
        pass
    finally:
        proxy.stop()


if __name__ == "__main__":
    main()
