"""A round-robin TCP balancer without affinity, for the scale-out tests: each accepted connection goes to the next
backend in turn (a client that opens one TCP connection per request lands on another replica each time)."""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
from collections.abc import Iterator


class RoundRobin:
    """Listens on a free loopback port; pipes every accepted connection to the next of ``backends`` in turn."""

    def __init__(self, backends: list[tuple[str, int]]) -> None:
        self.backends = backends
        self.routed = [0] * len(backends)
        """How many connections went to each backend."""
        self._turn = itertools.cycle(range(len(backends)))
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._closed = False
        self._live: set[socket.socket] = set()
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def url(self, path: str = "/acp", scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}{path}"

    def cut(self) -> None:
        """A network outage: refuse new connections and reset every open one."""
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread (a bare close does not)
        self._listener.close()
        for sock in list(self._live):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self._live.clear()

    def restore(self) -> None:
        """The outage ends: listen on the same port again."""
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def _accept(self, listener: socket.socket) -> None:
        while not self._closed:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            index = next(self._turn)
            self.routed[index] += 1
            try:
                server = socket.create_connection(self.backends[index], timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            self._live |= {client, server}
            for one, other in ((client, server), (server, client)):
                threading.Thread(target=_pipe, args=(one, other), daemon=True).start()

    def close(self) -> None:
        self._closed = True
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)
        self._listener.close()


def _pipe(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            target.sendall(data)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)
    with contextlib.suppress(OSError):
        source.close()


@contextlib.contextmanager
def round_robin(backends: list[tuple[str, int]]) -> Iterator[RoundRobin]:
    """A `RoundRobin` balancer in front of ``backends`` for the duration of the block."""
    balancer = RoundRobin(backends)
    try:
        yield balancer
    finally:
        balancer.close()


def free_port() -> int:
    """A TCP port free on loopback right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
