"""Real loopback agents for tests: a ThreadingHTTPServer on 127.0.0.1, port 0, scripted per test."""

from __future__ import annotations

import http.client
import json
import os
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tests.support import ROOT

with open(os.path.join(ROOT, "backends", "stub_replies.json"), encoding="utf-8") as _f:
    CANNED: dict[str, Any] = json.load(_f)


@dataclass(frozen=True)
class Received:
    """One request as the agent saw it."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    client_port: int
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)


Respond = Callable[[Received, BaseHTTPRequestHandler], None]


class _ServedInThread:
    """A server on 127.0.0.1, port 0, served by a daemon thread from __enter__ to __exit__."""

    server: ThreadingHTTPServer

    def serve(self, server: ThreadingHTTPServer) -> None:
        self.server = server
        self.thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    def __enter__(self) -> Any:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


class LoopbackAgent(_ServedInThread):
    """An HTTP/1.1 keep-alive server whose every reply is decided by `respond`."""

    def __init__(self, respond: Respond, tls: ssl.SSLContext | None = None) -> None:
        self.respond = respond
        self.scheme = "https" if tls else "http"
        self.received: list[Received] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        self.release = threading.Event()
        self._lock = threading.Lock()
        agent = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                received = Received(
                    "POST", self.path, dict(self.headers.items()), self.rfile.read(length), self.client_address[1], time.monotonic()
                )
                with agent._lock:
                    agent.received.append(received)
                    agent.in_flight += 1
                    agent.peak_in_flight = max(agent.peak_in_flight, agent.in_flight)
                try:
                    agent.respond(received, self)
                finally:
                    with agent._lock:
                        agent.in_flight -= 1

            def log_message(self, format: str, *args: Any) -> None:
                pass

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: Any, client_address: Any) -> None:
                pass  # resets and aborted clients are what these tests provoke

        server = Server(("127.0.0.1", 0), Handler)
        if tls is not None:
            server.socket = tls.wrap_socket(server.socket, server_side=True)
        self.serve(server)

    def __exit__(self, *exc: object) -> None:
        self.release.set()
        super().__exit__(*exc)

    def url(self, path: str = "/run") -> str:
        return f"{self.scheme}://127.0.0.1:{self.server.server_address[1]}{path}"

    @property
    def connections(self) -> int:
        """How many distinct client connections the requests came on."""
        return len({received.client_port for received in self.received})

    def wait_for_requests(self, count: int, timeout: float = 10.0) -> None:
        """Block until `count` requests arrived (bounded)."""
        deadline = time.monotonic() + timeout
        while len(self.received) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"only {len(self.received)} of {count} requests arrived within {timeout}s")
            time.sleep(0.01)


def send(handler: BaseHTTPRequestHandler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    """A complete response with Content-Length, so the connection stays alive."""
    handler.send_response(status)
    for name, value in (headers or {}).items():
        handler.send_header(name, value)
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
    handler.wfile.flush()


def send_json(handler: BaseHTTPRequestHandler, obj: Any, status: int = 200, headers: dict[str, str] | None = None) -> None:
    send(handler, status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})


def reset(handler: BaseHTTPRequestHandler) -> None:
    """Abort the connection with a TCP reset, as a crashing agent or a load balancer does."""
    handler.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    handler.connection.close()
    handler.close_connection = True


def canned(received: Received, handler: BaseHTTPRequestHandler) -> None:
    """A correct agent: the stub's canned reply for each canonical prompt."""
    prompt = received.json["prompt"]
    if prompt in CANNED:
        send_json(handler, CANNED[prompt])
    else:
        send_json(handler, {"error": "unknown prompt"}, 400)


class LoopbackProxy(_ServedInThread):
    """A forward proxy: absolute-URI requests are relayed, CONNECT is tunnelled; it records each request line."""

    def __init__(self) -> None:
        self.request_lines: list[str] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                proxy.request_lines.append(self.requestline)
                target = urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                upstream = http.client.HTTPConnection(target.hostname or "", target.port or 80, timeout=10)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "connection")}
                upstream.request("POST", target.path + (f"?{target.query}" if target.query else ""), self.rfile.read(length), headers)
                reply = upstream.getresponse()
                send(self, reply.status, reply.read(), {"Content-Type": reply.getheader("Content-Type", "")})
                upstream.close()

            def do_CONNECT(self) -> None:
                proxy.request_lines.append(self.requestline)
                host, _, port = self.path.rpartition(":")
                upstream = socket.create_connection((host, int(port)), timeout=10)
                self.send_response(200, "Connection established")
                self.end_headers()
                self.wfile.flush()
                sockets = [self.connection, upstream]
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline:
                    readable, _, _ = select.select(sockets, [], [], 0.1)
                    for sock in readable:
                        data = sock.recv(65536)
                        if not data:
                            upstream.close()
                            self.close_connection = True
                            return
                        (upstream if sock is self.connection else self.connection).sendall(data)
                upstream.close()
                self.close_connection = True

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self.serve(server)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"
