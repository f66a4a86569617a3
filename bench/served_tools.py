"""What a served tool call costs: a call through the run's tool server (MCP's streamable HTTP transport, and the plain
…/call endpoint) against a bare loopback JSON POST, in the same run.

Run: python3 bench/served_tools.py [--calls N] [--rounds R]   (about half a minute with the defaults: 4 rounds of 2,000)

The servers run in this process: harness/serving/tools.py's ToolServer on 127.0.0.1, each call answered by a trial's
ToolPlayer, and for the floor a ThreadingHTTPServer handler that reads a JSON body and answers a fixed JSON one. The
client is a process of its own, as an agent is: one http.client keep-alive connection per kind, an MCP one initialized
first, as an SDK client is after its handshake. The kinds:
  scripted     a tool whose result the task file gives (the player answers it in the server's thread)
  environment  a no-op method of a tool environment (the player asks the trial's worker process over its pipe)
  bare         the floor any loopback HTTP call pays
Rounds are interleaved (every kind in turn, each a trial of its own, which is served at most 10,000 calls); prints
each one's p50 and p99 in microseconds over every round's calls, and its p50 over the bare POST's. Target (issue 31):
an MCP call within 2x the bare POST.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.conversation import ToolPlayer
from harness.environments import world_of
from harness.records import Environment, Tool, ToolScript
from harness.serving.tools import MAX_CALLS, ToolServer

NO_OP = "class NoOp:\n    def noop(self):\n        return 'ok'\n\n    def state(self):\n        return {}\n"
TOOL = Tool("bench.noop", "Does nothing.", {"type": "object", "properties": {}})
ANSWER = json.dumps({"result": "ok"}).encode()
WARM_UP = 50  # calls of each kind before the rounds: the connections, the worker's first call
# The agent's side: argv is the port, {kind: path} as JSON, the calls a round and the rounds; prints {kind: [us...]}.
CLIENT = """
import http.client, json, sys, time

ports, paths, calls, rounds = json.loads(sys.argv[1]), json.loads(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
CALL = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "bench.noop", "arguments": {}}}
PLAIN = {"name": "bench.noop", "arguments": {}}

def post(connection, path, headers, message):
    connection.request("POST", path, json.dumps(message).encode(), headers)
    response = connection.getresponse()
    body = response.read()
    if response.status >= 300:
        raise SystemExit(f"POST {path}: HTTP {response.status} {body[:200]!r}")
    return {k.lower(): v for k, v in response.getheaders()}, json.loads(body) if body else None

clients = {}
for kind, path in paths.items():
    connection, headers = http.client.HTTPConnection("127.0.0.1", ports[kind]), dict(HEADERS)
    if kind.endswith("MCP"):
        init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}
        said, _ = post(connection, path, headers, {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
        headers.update({"Mcp-Session-Id": said["mcp-session-id"], "MCP-Protocol-Version": "2025-06-18"})
        post(connection, path, headers, {"jsonrpc": "2.0", "method": "notifications/initialized"})
        clients[kind] = (connection, path, headers, CALL, lambda answer: answer["result"]["isError"] is False)
    else:
        clients[kind] = (connection, path, headers, PLAIN, lambda answer: answer == {"result": "ok"})

def timed(connection, path, headers, message, good, count):
    times = []
    for _ in range(count):
        started = time.perf_counter()
        _, answer = post(connection, path, headers, message)
        times.append((time.perf_counter() - started) * 1e6)
        if not good(answer):
            raise SystemExit(f"POST {path}: unexpected answer {answer!r}")
    return times

for client in clients.values():  # warm up: the connections, the worker's first call
    timed(*client, 50)  # WARM_UP
times = {kind: [] for kind in clients}
for _ in range(rounds):
    for kind, client in clients.items():
        times[kind] += timed(*client, calls)
print(json.dumps(times))
"""


class Bare(BaseHTTPRequestHandler):
    """Reads a JSON body and answers a fixed JSON one, kept alive."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(ANSWER)))
        self.end_headers()
        self.wfile.write(ANSWER)

    def log_message(self, format: str, *args: Any) -> None:
        pass


def figures(times: list[float]) -> tuple[float, float]:
    """p50 and p99."""
    ordered = sorted(times)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000, help="calls of each kind in a round (default 2000)")
    parser.add_argument("--rounds", type=int, default=4, help="interleaved rounds (default 4)")
    args = parser.parse_args()
    if args.calls * args.rounds + WARM_UP > MAX_CALLS:  # past them, a trial's calls are refused
        parser.error(f"--calls x --rounds is at most {MAX_CALLS - WARM_UP}: a trial is served {MAX_CALLS} calls")
    bare = ThreadingHTTPServer(("127.0.0.1", 0), Bare)
    bare.daemon_threads = True
    threading.Thread(target=bare.serve_forever, daemon=True).start()
    with tempfile.TemporaryDirectory() as folder, ToolServer() as server:
        module = os.path.join(folder, "noop.py")
        with open(module, "w", encoding="utf-8") as f:
            f.write(NO_OP)
        spec = Environment(module=module, class_name="NoOp", config={}, methods={TOOL.name: "noop"})
        with world_of(spec) as world:
            ports, paths = {"bare": bare.server_address[1]}, {"bare": "/run"}
            for kind in ("scripted", "environment"):
                for endpoint in ("MCP", "plain"):  # a trial of its own each: a player is a trial's
                    player = ToolPlayer({TOOL.name: ToolScript(results=("ok",))}) if kind == "scripted" else None
                    turn = server.serve((TOOL,), (player or ToolPlayer({}, world)).answer, 1)
                    url = turn.url if endpoint == "MCP" else turn.call_url
                    name = f"{kind} {endpoint}"
                    ports[name], paths[name] = server.port, url.split(f":{server.port}", 1)[1]
            argv = [
                sys.executable,
                "-c",
                CLIENT,
                json.dumps(ports),
                json.dumps(paths),
                str(args.calls),
                str(args.rounds),
            ]
            client = subprocess.run(argv, capture_output=True, text=True)
            if client.returncode != 0:
                raise SystemExit(f"the client failed: {client.stderr.strip()[-500:]}")
            times: dict[str, list[float]] = json.loads(client.stdout)
    bare.shutdown()
    floor = figures(times["bare"])[0]
    print(
        f"served tools  {args.rounds} interleaved rounds of {args.calls} calls of each kind, a keep-alive connection"
        f" each, from a client process, 127.0.0.1 ({sys.executable})"
    )
    print(f"  {'':<20} {'p50 us':>8} {'p99 us':>8}   p50 / bare POST")
    for name, values in times.items():
        p50, p99 = figures(values)
        print(f"  {name:<20} {p50:>8.0f} {p99:>8.0f}   {p50 / floor:.2f}x")


if __name__ == "__main__":
    main()
