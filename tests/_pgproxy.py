"""A TCP proxy in front of a real PostgreSQL server that loses the answer to one commit.

The proxy reads the PostgreSQL protocol as it relays it (a startup packet, then messages of
one type byte and a length). Armed with :meth:`Proxy.lose_answer_to`, it forwards the first
client message holding a marker (``b"append_chunk"``: an append; ``b"COMMIT"``: the end of a
transaction), keeps back everything the server answers to it until the server says it is
ready for the next query (so the commit is made), and then cuts the connection: the client
never learns that its write was made. It can also go down (connections refused, as from a
stopped server) at that very moment, and come back. No timing is involved: each step waits for
the protocol message before it.

Use URLs with ``sslmode=disable&gssencmode=disable`` (the proxy relays plain protocol only).
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from urllib.parse import urlsplit, urlunsplit


@dataclass
class _Link:
    client: socket.socket
    server: socket.socket
    holding: bool = False  # the server's answers are kept back, then the link is cut
    cut: threading.Event = field(default_factory=threading.Event)

    def close(self) -> None:
        self.cut.set()
        for sock in (self.client, self.server):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _messages(sock: socket.socket, *, startup: bool) -> Iterator[tuple[bytes, bytes]]:
    """``(type, whole message bytes)`` read from ``sock`` until it closes."""
    buf = b""
    pending_startup = startup

    def fill(n: int) -> bool:
        nonlocal buf
        while len(buf) < n:
            try:
                data = sock.recv(65536)
            except OSError:
                return False
            if not data:
                return False
            buf += data
        return True

    while True:
        if pending_startup:
            if not fill(4):
                return
            (length,) = struct.unpack("!I", buf[:4])
            if not fill(length):
                return
            message, buf = buf[:length], buf[length:]
            pending_startup = False
            yield b"", message
            continue
        if not fill(5):
            return
        (length,) = struct.unpack("!I", buf[1:5])
        if not fill(1 + length):
            return
        message, buf = buf[: 1 + length], buf[1 + length :]
        yield message[:1], message


class Proxy:
    """A proxy on a free port of 127.0.0.1 to ``upstream`` (``host:port``)."""

    def __init__(self, upstream_url: str) -> None:
        parts = urlsplit(upstream_url)
        assert parts.hostname is not None and parts.port is not None
        self._upstream_url = parts
        self._upstream = (parts.hostname, parts.port)
        self._lock = threading.Lock()
        self._links: list[_Link] = []
        self._marker: bytes | None = None
        self._then: Callable[[], None] | None = None
        self._stay_down = False
        self.lost = threading.Event()
        """Set once an answer was kept back and its connection cut."""
        self.failures: list[BaseException] = []
        """What a ``then`` callback raised."""
        self._listener: socket.socket | None = None
        self.port = 0
        self.come_back()

    def url(self, query: str = "") -> str:
        """The upstream URL with the proxy's address (and ``query`` added)."""
        parts = self._upstream_url
        netloc = parts.netloc.rsplit("@", 1)
        host = f"127.0.0.1:{self.port}"
        netloc_new = f"{netloc[0]}@{host}" if len(netloc) == 2 else host
        extra = "sslmode=disable&gssencmode=disable" + (f"&{query}" if query else "")
        joined = f"{parts.query}&{extra}" if parts.query else extra
        return urlunsplit(parts._replace(netloc=netloc_new, query=joined))

    def lose_answer_to(
        self, marker: bytes, *, then: Callable[[], None] | None = None, stay_down: bool = False
    ) -> None:
        """Lose the answer to the next client message holding ``marker``.

        Args:
            marker: bytes of the message (``b"append_chunk"``, ``b"COMMIT"``).
            then: run once the server has answered, before the client's connection is cut
                (another writer's turn while the client waits).
            stay_down: go down when the answer is lost (the server "stopped"), until
                :meth:`come_back`.
        """
        with self._lock:
            self._marker = marker
            self._then = then
            self._stay_down = stay_down
            self.lost.clear()

    def go_down(self) -> None:
        """Refuse new connections and cut every open one, as a stopped server does."""
        with self._lock:
            listener, self._listener = self._listener, None
            links, self._links = self._links, []
        if listener is not None:
            listener.close()
        for link in links:
            link.close()

    def come_back(self) -> None:
        """Accept connections again (on the same port)."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def close(self) -> None:
        """Stop for good."""
        self.go_down()

    # -- relaying ---------------------------------------------------------------------------

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # went down
            server = socket.create_connection(self._upstream)
            link = _Link(client, server)
            with self._lock:
                if self._listener is not listener:
                    link.close()
                    continue
                self._links.append(link)
            threading.Thread(target=self._to_server, args=(link,), daemon=True).start()
            threading.Thread(target=self._to_client, args=(link,), daemon=True).start()

    def _to_server(self, link: _Link) -> None:
        for _, message in _messages(link.client, startup=True):
            with self._lock:
                if self._marker is not None and self._marker in message:
                    self._marker = None
                    link.holding = True
            try:
                link.server.sendall(message)
            except OSError:
                return
        link.close()

    def _to_client(self, link: _Link) -> None:
        for kind, message in _messages(link.server, startup=False):
            if not link.holding:
                try:
                    link.client.sendall(message)
                except OSError:
                    return
                continue
            if kind == b"Z":  # ready for the next query: the commit is made
                self._lose(link)
                return
        link.close()

    def _lose(self, link: _Link) -> None:
        with self._lock:
            then, stay_down = self._then, self._stay_down
            self._then = None
        try:
            if stay_down:
                self.go_down()
            if then is not None:
                then()
        except BaseException as exc:  # the test reads it; the client must not hang
            self.failures.append(exc)
        link.close()
        with self._lock:
            if link in self._links:
                self._links.remove(link)
        self.lost.set()
