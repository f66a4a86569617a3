"""What the tool server and the model proxy share: one lifecycle (bound on loopback, served on a thread of its own, a
path per trial, shut down with the run) and one bounded way to take a request (its body capped, every read and write
timed out, the connections capped, and close() shutting every one of them within a bound).
"""

from __future__ import annotations

import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DRAIN = 2.0  # seconds a refused body is read and thrown away, so that its sender reads the refusal
CLOSE_WAIT = 2.0  # seconds close() waits for the connections' threads, once every connection is shut
POLL = 0.2  # seconds between the listener's looks at whether it is to stop
CHUNK = 65536


def new_token() -> str:
    """A trial's path: 192 random bits, the only way in."""
    return secrets.token_urlsafe(24)


class Listener(ThreadingHTTPServer):
    """The HTTP server: a daemon thread per connection, each connection known so that close() can shut it, and the
    paths it serves (a token to what it serves there)."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = 64
    max_connections = 256  # open at once; past them, a new connection is closed at once

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        super().__init__(address, handler)
        self.paths: dict[str, Any] = {}
        self.lock = threading.Lock()
        self.connections: set[socket.socket] = set()  # the clients', max_connections at most
        self.threads: set[threading.Thread] = set()
        self.closing = False
        self.closed = False
        self.thread: threading.Thread | None = None

    def serve_in_thread(self, name: str) -> None:
        """Serve on a daemon thread of its own until close()."""
        self.thread = threading.Thread(target=self.serve_forever, args=(POLL,), name=name, daemon=True)
        self.thread.start()

    def open(self, token: str, served: Any) -> Callable[[str], object]:
        """Serve at a token's path; what ends serving there."""
        paths = self.paths
        paths[token] = served
        return lambda token: paths.pop(token, None)

    def close(self) -> None:
        """Stop serving: no path served, the listener and every connection shut, their threads waited for a bounded
        time."""
        if self.closed:
            return
        self.closed = True
        self.paths.clear()
        self.shutdown()
        self.server_close()
        self.release()
        with self.lock:
            self.closing = True
            connections, threads = self.sockets(), list(self.threads)
        for connection in connections:
            try:
                connection.shutdown(socket.SHUT_RDWR)  # its thread, reading or writing, is woken; it closes it
            except OSError:
                pass
        deadline = time.monotonic() + CLOSE_WAIT
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        if self.thread is not None:
            self.thread.join(max(0.0, deadline - time.monotonic()))

    def release(self) -> None:
        """What a server holds besides its connections, let go once the listener is closed."""

    def sockets(self) -> list[socket.socket]:
        """The sockets close() shuts (read under the lock)."""
        return list(self.connections)

    def process_request(self, request: Any, client_address: Any) -> None:
        with self.lock:
            refused = self.closing or len(self.connections) >= self.max_connections
            if not refused:
                self.connections.add(request)
        if refused:
            self.shutdown_request(request)
            return
        super().process_request(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        thread = threading.current_thread()
        with self.lock:
            self.threads.add(thread)
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self.lock:
                self.connections.discard(request)
                self.threads.discard(thread)

    def handle_error(self, request: Any, client_address: Any) -> None:
        if not isinstance(sys.exc_info()[1], OSError):  # a client gone away is no news; anything else is a bug
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    """One connection's requests, each answered by _handle(): a body read whole within max_body, or refused."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # the headers and the body go out as two writes: neither waits on the other's ACK
    max_body = 1024 * 1024  # bytes of one request's body
    server: Listener

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the run's console is the run's."""

    def do_POST(self) -> None:
        self._handle()

    do_GET = do_DELETE = do_PUT = do_PATCH = do_HEAD = do_OPTIONS = do_POST

    def _handle(self) -> None:
        raise NotImplementedError

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The HTTP server's own refusals (a header too long, too many, a bad request line): sent, then the rest of
        the request read and dropped, as a 413's is."""
        super().send_error(code, message, explain)
        self._drain()

    def handle_expect_100(self) -> bool:
        """A body over max_body is refused before it is sent, when the client asks first."""
        if self._length() > self.max_body:
            self._send(413, close=True)
            return False
        return super().handle_expect_100()

    def _length(self) -> int:
        """The body's length as the request says it, -1 when it says what is not one."""
        given = self.headers.get("Content-Length", "0")
        if not (given.isascii() and given.isdigit()):  # int() would take " +1_0 " too
            return -1
        digits = given.lstrip("0")
        return int(digits or "0") if len(digits) <= 18 else self.max_body + 1  # int() raises past 4,300 digits

    def _body(self) -> bytes | None:
        """The request's body, read whole when it is within max_body; None when the request was answered here."""
        if "Transfer-Encoding" in self.headers:
            self._send(411, close=True)  # a body of a length not said up front: refused rather than read on and on
            return None
        length = self._length()
        if length < 0:
            self._send(400, close=True)
            return None
        if length > self.max_body:
            self._send(413, close=True)
            self._drain()
            return None
        body = self.rfile.read(length)
        if len(body) < length:
            self.close_connection = True
            return None
        return body

    def _drain(self) -> None:
        """Read and drop what the client still sends, for DRAIN seconds at most, so that it reads the 413 rather than
        a reset (a socket closed with data unread is reset)."""
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_WR)
            deadline = time.monotonic() + DRAIN
            while (left := deadline - time.monotonic()) > 0:
                self.connection.settimeout(left)
                if not self.connection.recv(CHUNK):
                    break
        except OSError:
            pass

    def _send(
        self,
        status: int,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        close: bool = False,
        reason: str | None = None,
    ) -> None:
        """An answer whose length is said; a client gone away closes the connection."""
        try:
            self.send_response_only(status, reason)
            for key, value in (headers or {}).items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(body)))
            if close:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)
            self.wfile.flush()
        except OSError:
            self.close_connection = True
