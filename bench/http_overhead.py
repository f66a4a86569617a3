"""How much the harness adds on top of the agent: efficiency, overhead, memory and cold start.

Run: python3 bench/http_overhead.py        (about half a minute on 2 cores)

Starts a loopback agent (stdlib ThreadingHTTPServer, keep-alive, fixed latency), generates N
tasks, runs the real CLI against it, and prints:
  1. efficiency at latency 20 ms, N = 2000, concurrency 32: ideal time / the run's own time, from its
     first request to its last reply (`durationMs`; start-up is figure 4), best of 5 (target >= 0.90)
  2. overhead at latency 0, N = 2000, concurrency 1: the harness's wall time / the wall time of a bare
     keep-alive http.client loop, each a whole process timed from outside, in 5 back-to-back pairs (the
     machine's speed drifts), the median pair (target <= 1.5); and, stricter, the harness's wall time
     against the bare loop's own timer, which leaves out its interpreter start and imports
  3. peak RSS of the harness at N = 10,000 tasks (target < 80 MB)
  4. cold-start wall time of `make eval` on the stub, against `python3 -c pass`
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(ROOT, "eval_agent.py")
REPLY = json.dumps({"toolCall": {"name": "bench.echo", "args": {"text": "ok"}}}).encode()


class BenchAgent:
    """A keep-alive loopback agent that answers every prompt with the expected call after `latency` seconds."""

    def __init__(self) -> None:
        self.latency = 0.0
        bench = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each keep-alive reply waits ~40 ms for a delayed ACK

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                if bench.latency:
                    time.sleep(bench.latency)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(REPLY)))
                self.end_headers()
                self.wfile.write(REPLY)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/run"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def write_tasks(folder: str, count: int) -> str:
    """A task file of `count` tasks that the bench agent passes."""
    tool = {
        "name": "bench.echo",
        "description": "Echo.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
    }
    tasks = [
        {
            "id": f"t{i}",
            "category": f"c{i % 10}",
            "prompt": f"Please echo number {i}.",
            "expect": {"tool": "bench.echo", "requiredArgs": ["text"]},
        }
        for i in range(count)
    ]
    path = os.path.join(folder, f"tasks-{count}.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"version": 1, "tools": [tool], "tasks": tasks}, f)
    return path


def harness_env(**settings: str) -> dict[str, str]:
    """This environment without EVAL_* settings, plus `settings`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_")}
    env.update(settings)
    return env


def run_harness(url: str, tasks: str, concurrency: int, folder: str) -> tuple[float, float]:
    """(wall seconds of one real CLI run, seconds of its run phase as its results file says); every task must pass."""
    results = os.path.join(folder, "r.json")
    env = harness_env(EVAL_AGENT_URL=url, EVAL_CONCURRENCY=str(concurrency), EVAL_TASKS=tasks, EVAL_RESULTS=results)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, SCRIPT], env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    wall = time.perf_counter() - started
    if proc.returncode != 0:
        raise SystemExit(f"harness run failed ({proc.returncode}): {proc.stderr.strip()}")
    with open(results, encoding="utf-8") as f:
        return wall, json.load(f)["durationMs"] / 1000


BARE_LOOP = """
import http.client, json, sys, time
port, count = int(sys.argv[1]), int(sys.argv[2])
body = json.dumps({"prompt": "Please echo number 0.", "taskId": "t0", "runId": "x"}).encode()
conn = http.client.HTTPConnection("127.0.0.1", port)
started = time.perf_counter()
for _ in range(count):
    conn.request("POST", "/run", body, {"Content-Type": "application/json"})
    json.loads(conn.getresponse().read())
print(time.perf_counter() - started)
"""


def bare_loop(url: str, count: int) -> tuple[float, float]:
    """(wall seconds of a bare keep-alive http.client loop sending the same POSTs, in its own process as the harness
    runs in its own; seconds of the loop alone, by its own timer)."""
    port = url.split(":")[2].split("/")[0]
    started = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", BARE_LOOP, port, str(count)], capture_output=True, text=True, check=True
    )
    return time.perf_counter() - started, float(out.stdout)


def median_wall(argv: list[str], runs: int, env: dict[str, str]) -> float:
    """Median wall seconds of running argv to completion."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, check=True, stdout=subprocess.DEVNULL)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main() -> None:
    # Measure the harness as it runs from the second time on: with its bytecode cached. Machines that set
    # PYTHONDONTWRITEBYTECODE (this one does) would otherwise compile every module on every run.
    subprocess.run([sys.executable, "-m", "compileall", "-q", "-x", r"[/\\]\.venv", ROOT], check=True)
    agent = BenchAgent()
    with tempfile.TemporaryDirectory() as folder:
        # First, so that no earlier child's peak hides this one's: ru_maxrss of children is the largest so far.
        run_harness(agent.url, write_tasks(folder, 10_000), 4, folder)
        peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
        print(f"memory      peak RSS at N=10000: {peak_mb:.1f} MB  (target < 80 MB)")

        tasks_2000 = write_tasks(folder, 2000)

        agent.latency = 0.020
        wall, run = min((run_harness(agent.url, tasks_2000, 32, folder) for _ in range(5)), key=lambda times: times[1])
        ideal = 2000 * agent.latency / 32
        print(
            f"efficiency  latency 20 ms, N=2000, concurrency 32: ideal {ideal:.2f} s / run {run:.2f} s"
            f" = {ideal / run:.2f}"
            f"  (target >= 0.90; whole process {wall:.2f} s)"
        )

        agent.latency = 0.0
        pairs = [(run_harness(agent.url, tasks_2000, 1, folder)[0], *bare_loop(agent.url, 2000)) for _ in range(5)]
        pairs.sort(key=lambda p: p[0] / p[1])
        harness, bare, _loop = pairs[len(pairs) // 2]
        print(
            f"overhead    latency 0, N=2000, concurrency 1: harness {harness:.2f} s"
            f" / bare http.client loop {bare:.2f} s = {harness / bare:.2f}"
            f"  (target <= 1.5; whole processes; the 5 pairs: {', '.join(f'{h / b:.2f}' for h, b, _ in pairs)})"
        )
        strict = sorted(whole / loop for whole, _, loop in pairs)
        print(
            "            the same against the bare loop's own timer, its interpreter start and imports left out:"
            f" median {strict[2]:.2f}"
            f"  (the 5 pairs: {', '.join(f'{r:.2f}' for r in strict)})"
        )

        env = harness_env(EVAL_RESULTS=os.path.join(folder, "stub.json"))
        make = median_wall(["make", "--no-print-directory", "-s", "-C", ROOT, "eval"], 10, env)
        floor = median_wall([sys.executable, "-c", "pass"], 10, env)
        print(
            f"cold start  make eval on the stub: {make * 1000:.0f} ms median of 10"
            f"  (python3 -c pass: {floor * 1000:.0f} ms)"
        )


if __name__ == "__main__":
    main()
