"""What the tests share: the real CLI in a subprocess, task files in temporary folders, and loopback agents.

A loopback agent is a real HTTP/1.1 server (ThreadingHTTPServer on 127.0.0.1, port 0) whose every reply a test scripts;
TempDirTestCase.serve starts one for the test and stops it after.
"""

from __future__ import annotations

import http.client
import json
import os
import select
import signal
import socket
import ssl
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from harness.leaks import NO_SECRETS, Secrets
from harness.records import AgentRequest, AgentSurface, Backend, Reply, Task
from harness.taskfile import load_task_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "eval_agent.py")
SHIPPED_TASKS = os.path.join(ROOT, "eval-tasks.json")
# The ten tasks the canonical file started with: tests pin behaviour on this copy, so the shipped file can grow.
CANONICAL_TASKS = os.path.join(ROOT, "tests", "data", "tasks", "imageman-ten.json")
DATA = os.path.join(ROOT, "tests", "data")
CLI_TIMEOUT = 60
PROXY_VARIABLES = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}

with open(os.path.join(ROOT, "backends", "stub_replies.json"), encoding="utf-8") as _f:
    CANNED: dict[str, Any] = json.load(_f)


def clean_env(**overrides: str) -> dict[str, str]:
    """The current environment without any EVAL_* setting or proxy, on the ten-task file, plus overrides."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith("EVAL_") and key.lower() not in PROXY_VARIABLES
    }
    env["EVAL_TASKS"] = CANONICAL_TASKS
    env.update(overrides)
    return env


class InProcessAgent:
    """An agent in this process, in the stub's place (`mock.patch.dict(BACKENDS, {"stub": ...})`): a subclass says
    what it answers in run()."""

    NAME = "stub"
    SETTINGS = ()
    PLAYS_TOOLS = True

    @classmethod
    def configure(cls, sources: Any) -> None:
        """No settings."""

    def __init__(
        self, settings: Any = None, surface: Any = None, run_id: str = "", *, hidden: Secrets = NO_SECRETS
    ) -> None:
        self.hidden = hidden

    def secrets(self) -> dict[str, str]:
        return {}

    def describe(self) -> dict[str, Any]:
        return {}

    def run(self, request: AgentRequest) -> Reply:
        raise NotImplementedError


def stop_signals_as_from_a_terminal() -> None:
    """For a child about to be signalled (preexec_fn): SIGINT, SIGTERM and SIGHUP back to their defaults, whatever
    the test runner inherited (nohup ignores SIGHUP; the harness keeps an ignored signal ignored)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def run_cli(
    *args: str, env: Mapping[str, str] | None = None, cwd: str | None = None, script: str = SCRIPT
) -> tuple[str, str, int]:
    """Run eval_agent.py without site-packages (proving it needs the stdlib only); (stdout, stderr, exit code)."""
    proc = subprocess.run(
        [sys.executable, "-S", script, *args],
        capture_output=True,
        text=True,
        env=dict(env) if env is not None else clean_env(),
        cwd=cwd,
        timeout=CLI_TIMEOUT,
    )
    return proc.stdout, proc.stderr, proc.returncode


def backend_for(environ: Mapping[str, str]) -> Backend:
    """The backend a run with these settings makes, made in this process, with the ten canonical tasks' surface."""
    from backends import BACKENDS
    from eval_agent import configure

    config, name, settings = configure([], {"EVAL_TASKS": CANONICAL_TASKS, **environ})
    task_file = load_task_file(config.tasks_path)
    return BACKENDS[name](settings, AgentSurface(task_file.tools, task_file.system), config.run_id)


def canonical_task(task_id: str) -> Task:
    """One of the ten canonical tasks, loaded."""
    return next(task for task in load_task_file(CANONICAL_TASKS).tasks if task.id == task_id)


def canonical_task_data() -> dict[str, Any]:
    """A fresh copy of the canonical task file's content."""
    with open(CANONICAL_TASKS, encoding="utf-8") as f:
        return json.load(f)


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
                    "POST",
                    self.path,
                    dict(self.headers.items()),
                    self.rfile.read(length),
                    self.client_address[1],
                    time.monotonic(),
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


def send_json(
    handler: BaseHTTPRequestHandler, obj: Any, status: int = 200, headers: dict[str, str] | None = None
) -> None:
    send(handler, status, json.dumps(obj).encode(), {"Content-Type": "application/json", **(headers or {})})


def on_served_tools(body: Mapping[str, Any], reply: Mapping[str, Any]) -> Mapping[str, Any]:
    """The reply, each call it reports made first on the tool server the request names (at its plain endpoint), as an
    agent that runs its tools on the served ones does; as it is when the request names none."""
    server = body.get("toolServer")
    if server is not None:
        for call in [*([reply["toolCall"]] if reply.get("toolCall") else []), *reply.get("toolCalls", [])]:
            call_served(server["callUrl"], call["name"], call.get("args", {}))
    return reply


def call_served(url: str, name: str, args: Mapping[str, Any]) -> Any:
    """What the tool server's plain endpoint answers for one call."""
    import urllib.request

    request = urllib.request.Request(
        url, json.dumps({"name": name, "arguments": args}).encode(), {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=CLI_TIMEOUT) as response:
        return json.load(response)


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
                headers = {
                    k: v for k, v in self.headers.items() if k.lower() not in ("proxy-authorization", "connection")
                }
                upstream.request(
                    "POST", target.path + (f"?{target.query}" if target.query else ""), self.rfile.read(length), headers
                )
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


class TempDirTestCase(unittest.TestCase):
    """A test with its own temporary working folder, and loopback agents that live as long as it does."""

    def setUp(self) -> None:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        self.tmp = tmp.name

    def work_in_tmp(self) -> None:
        """Make the temp folder the working folder until the test ends, so files are named as a user names them."""
        self.addCleanup(os.chdir, os.getcwd())
        os.chdir(self.tmp)

    def serve(self, respond: Respond, tls: ssl.SSLContext | None = None) -> LoopbackAgent:
        """A loopback agent answering as `respond` says, stopped when the test ends."""
        agent = LoopbackAgent(respond, tls).__enter__()
        self.addCleanup(agent.__exit__)
        return agent

    def refusing_url(self, path: str = "/run") -> str:
        """A loopback URL whose port refuses connections until the test ends.

        The port is bound and never listened on: a port merely closed could be taken by another test's server.
        """
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        self.addCleanup(sock.close)
        return f"http://127.0.0.1:{sock.getsockname()[1]}{path}"

    def write_json(self, name: str, data: Any) -> str:
        """Write data as JSON into the temp folder; return its path."""
        path = os.path.join(self.tmp, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(data, f)
        return path

    def read_json(self, name: str) -> Any:
        """Read a JSON file from the temp folder."""
        with open(os.path.join(self.tmp, name), encoding="utf-8") as f:
            return json.load(f)
