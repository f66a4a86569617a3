"""What the model proxy adds to a model call: a call through the run's proxy (harness/serving/models.py) against the
same call sent straight to the same loopback fake of the API, in the same run, streamed and not.

Run: python3 bench/model_proxy.py [--calls N] [--rounds R]   (about half a minute with the defaults)

The fake and the proxy run in this process: a ThreadingHTTPServer that answers a Chat Completions request with a fixed
completion, or with a stream of a few server-sent events (chunked, as the API sends them), and the proxy forwarding to
it. The client is a process of its own, as an agent is: one http.client keep-alive connection per kind, reading each
answer whole. Rounds are interleaved (every kind in turn); prints each kind's p50 and p99 in microseconds over every
round's calls, and the proxy's added p50 and p99 (proxied less direct). Target (issue 32): at most 1 ms added at p50.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.serving.models import ModelProxy

COMPLETION = json.dumps(
    {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "fake-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 5, "total_tokens": 17},
    }
).encode()
CHUNK = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": "fake-model"}
EVENTS = [
    *(
        b"data: " + json.dumps({**CHUNK, "choices": [{"index": 0, "delta": {"content": word}}]}).encode() + b"\n\n"
        for word in ("Hel", "lo", " there")
    ),
    b"data: " + json.dumps({**CHUNK, "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 5}}).encode(),
    b"\n\ndata: [DONE]\n\n",
]
# The agent's side: argv is {kind: (port, path)} as JSON, the calls a round and the rounds; prints {kind: [us...]}.
CLIENT = r"""
import http.client, json, sys, time
kinds, calls, rounds = json.loads(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
connections = {kind: http.client.HTTPConnection("127.0.0.1", port) for kind, (port, path) in kinds.items()}
plain = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}]}).encode()
streamed = json.dumps({"model": "fake-model", "messages": [{"role": "user", "content": "hi"}], "stream": True}).encode()
headers = {"Content-Type": "application/json", "Authorization": "Bearer sk-bench"}
times = {kind: [] for kind in kinds}
for _ in range(rounds):
    for kind, (port, path) in kinds.items():
        body = streamed if "stream" in kind else plain
        connection = connections[kind]
        for _ in range(calls):
            started = time.perf_counter()
            connection.request("POST", path, body, headers)
            response = connection.getresponse()
            response.read()
            times[kind].append((time.perf_counter() - started) * 1e6)
print(json.dumps(times))
"""


class Fake(BaseHTTPRequestHandler):
    """The API: a completion, or its stream when the body asks for one."""

    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        if b'"stream": true' in body:
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for event in EVENTS:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(COMPLETION)))
            self.end_headers()
            self.wfile.write(COMPLETION)
        self.wfile.flush()

    def log_message(self, format: str, *args: Any) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="calls of each kind a round")
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args()
    fake = ThreadingHTTPServer(("127.0.0.1", 0), Fake)
    fake.daemon_threads = True
    threading.Thread(target=fake.serve_forever, daemon=True).start()
    port = fake.server_address[1]
    with ModelProxy(f"http://127.0.0.1:{port}/v1") as proxy:
        trial = proxy.trial()
        proxy_port = int(proxy.base.rpartition(":")[2])
        path = trial.base_url.removeprefix(proxy.base) + "/chat/completions"
        kinds = {
            "direct": (port, "/v1/chat/completions"),
            "proxied": (proxy_port, path),
            "direct stream": (port, "/v1/chat/completions"),
            "proxied stream": (proxy_port, path),
        }
        ran = subprocess.run(
            [sys.executable, "-c", CLIENT, json.dumps(kinds), str(args.calls), str(args.rounds)],
            capture_output=True,
            text=True,
            check=True,
            timeout=600,
        )
        calls = len(trial.calls())
    fake.shutdown()
    times: dict[str, list[float]] = json.loads(ran.stdout)
    print(f"{args.rounds} rounds of {args.calls} calls of each kind; the proxy recorded {calls} calls")
    figures = {kind: _percentiles(values) for kind, values in times.items()}
    for kind, (p50, p99) in figures.items():
        print(f"{kind:16} p50 {p50:8.1f} us   p99 {p99:8.1f} us")
    for streamed in ("", " stream"):
        (direct50, direct99), (proxied50, proxied99) = figures[f"direct{streamed}"], figures[f"proxied{streamed}"]
        print(f"added{streamed or ' plain':9} p50 {proxied50 - direct50:8.1f} us   p99 {proxied99 - direct99:8.1f} us")


def _percentiles(values: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(values, n=100)
    return statistics.median(values), cuts[98]


if __name__ == "__main__":
    main()
