"""How the harness scales: time against a bare keep-alive loop, memory and results size per trial, garbage collection,
cold start, and concurrency efficiency; every figure a median of interleaved runs, with its spread.

Run: python3 bench/scaling.py           (about five minutes on 2 cores)
     python3 bench/scaling.py --quick   (N = 1,000 and 10,000 only, fewer repeats: about a minute)
     python3 bench/scaling.py --quick --against TREE [--against TREE ...]
        (TREE: another checkout's folder, e.g. `git worktree add /tmp/before REV`: its scaling rows and cold start are
        measured interleaved with this checkout's, each row against the same bare loop or interpreter run)

The agent is a loopback HTTP/1.1 server on asyncio (one thread, no per-connection threads to contend for the GIL), in
this process; the harness and the bare loop each run as a process of their own, timed from outside.
  1. scaling: for N = 1,000 / 10,000 / 50,000 tasks and runs = 1 and 5, at concurrency 1, the harness's wall time
     against a bare keep-alive http.client loop sending the same number of requests; the harness's peak RSS (from
     wait4), the results file's size per trial, and its garbage-collection pauses
  2. memory: what a task definition costs, and what each trial adds beyond it
  3. cold start: `python3 eval_agent.py` on the stub against `python3 -c pass`, the same interpreter binary, 20
     interleaved pairs; and the imports that cost most (python3 -X importtime)
  4. efficiency: latency 20 ms, N = 2,000, concurrency 32, ideal time / the run's own time (durationMs) and / the whole
     process's time, 10 runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
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
PYTHON = os.path.realpath(sys.executable)  # the binary itself: a shim on PATH would be timed along with it
REPLY = json.dumps({"toolCall": {"name": "bench.echo", "args": {"text": "ok"}}}).encode()
RESPONSE = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(REPLY), REPLY)
# The harness, with its garbage collector's pauses summed and said on stderr when it exits.
GC_PROBE = """
import atexit, gc, os, runpy, sys, time
paused, started = [0.0], [0.0]
def watch(phase, info):
    if phase == "start":
        started[0] = time.perf_counter()
    else:
        paused[0] += time.perf_counter() - started[0]
gc.callbacks.append(watch)
def said():
    # VmHWM, not wait4's ru_maxrss: a child started by vfork counts its parent's pages there, until its exec.
    with open("/proc/self/status") as f:
        peak = next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))
    print(f"gc-paused {paused[0]}", file=sys.stderr)
    print(f"peak-kb {peak}", file=sys.stderr)
atexit.register(said)
sys.argv = [sys.argv[1], *sys.argv[2:]]
sys.path.insert(0, os.path.dirname(sys.argv[0]))
runpy.run_path(sys.argv[0], run_name="__main__")
"""
BARE_LOOP = """
import http.client, json, sys
port, count = int(sys.argv[1]), int(sys.argv[2])
body = json.dumps({"prompt": "Please echo number 0.", "taskId": "t0", "runId": "x"}).encode()
conn = http.client.HTTPConnection("127.0.0.1", port)
for _ in range(count):
    conn.request("POST", "/run", body, {"Content-Type": "application/json"})
    json.loads(conn.getresponse().read())
"""


class Agent:
    """A keep-alive loopback agent on asyncio that answers every POST with the expected call after `latency` s."""

    def __init__(self) -> None:
        self.latency = 0.0
        self.served, self.answered = 0.0, 0  # the latency it really gave (a timer wakes late), over the requests
        ready = threading.Event()
        self.loop = asyncio.new_event_loop()

        async def serve() -> None:
            server = await asyncio.start_server(self.handle, "127.0.0.1", 0, backlog=256)
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            await server.serve_forever()

        threading.Thread(target=self.loop.run_until_complete, args=(serve(),), daemon=True).start()
        ready.wait(10)
        self.url = f"http://127.0.0.1:{self.port}/run"

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                )
                await reader.readexactly(length)
                if self.latency:
                    arrived = time.perf_counter()
                    await asyncio.sleep(self.latency)
                    self.served += time.perf_counter() - arrived
                    self.answered += 1
                writer.write(RESPONSE)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()


class ThreadedAgent:
    """A keep-alive loopback agent as most Python agents are served: the standard library's ThreadingHTTPServer."""

    def __init__(self) -> None:
        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # else each keep-alive reply waits ~40 ms for a delayed ACK

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers["Content-Length"]))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(REPLY)))
                self.end_headers()
                self.wfile.write(REPLY)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self.port = server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}/run"
        threading.Thread(target=server.serve_forever, daemon=True).start()


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


def environment(**settings: str) -> dict[str, str]:
    """This environment without EVAL_* settings, plus `settings`."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("EVAL_")}
    return {**env, **settings}


def measured(argv: list[str], env: dict[str, str], cwd: str) -> tuple[float, float, str]:
    """(wall seconds, CPU seconds, stderr) of one process run to completion."""
    started = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:3])} … failed ({proc.returncode}): {stderr.strip()[-500:]}")
    return wall, usage.ru_utime + usage.ru_stime, stderr


def harness(
    agent: Agent | ThreadedAgent, tasks: str, runs: int, concurrency: int | None, folder: str, tree: str = ROOT
) -> dict[str, float]:
    """One real CLI run of the checkout in `tree`: its wall time, CPU time, peak RSS, run time (durationMs), GC pauses
    and results size."""
    results = os.path.join(folder, "results.json")
    env = environment(EVAL_AGENT_URL=agent.url, EVAL_TASKS=tasks, EVAL_RUNS=str(runs), EVAL_RESULTS=results)
    if concurrency is not None:  # else the harness's default
        env["EVAL_CONCURRENCY"] = str(concurrency)
    wall, cpu, stderr = measured([PYTHON, "-c", GC_PROBE, os.path.join(tree, "eval_agent.py")], env, folder)
    with open(results, encoding="utf-8") as f:
        document = json.load(f)
    assert document["passed"] == document["total"], "every trial must pass"
    probed = dict(line.split(" ", 1) for line in stderr.splitlines() if line.startswith(("gc-paused ", "peak-kb ")))
    return {
        "wall": wall,
        "cpu": cpu,
        "rss": int(probed["peak-kb"]) / 1024,
        "gc": float(probed["gc-paused"]),
        "run": document["durationMs"] / 1000,
        "bytes": os.path.getsize(results),
    }


def bare(agent: Agent | ThreadedAgent, count: int, folder: str) -> float:
    return measured([PYTHON, "-c", BARE_LOOP, str(agent.port), str(count)], environment(), folder)[0]


def spread(values: list[float], fmt: str = ".2f") -> str:
    ordered = sorted(values)
    return f"{statistics.median(ordered):{fmt}} ({ordered[0]:{fmt}}-{ordered[-1]:{fmt}})"


def scaling(
    agent: ThreadedAgent, folder: str, sizes: list[tuple[int, int, int]], trees: list[str]
) -> dict[tuple[int, int], dict[str, float]]:
    """The scaling rows of each checkout (this one first), its runs interleaved with the others' and the bare loop's;
    this checkout's figures, by (tasks, runs)."""
    print(
        "scaling     the harness at its default concurrency (4) against a bare keep-alive http.client loop, each a"
        " whole process,\n            on a ThreadingHTTPServer agent at latency 0; the median of interleaved pairs"
    )
    print(
        f"            {'checkout  ' if len(trees) > 1 else ''}tasks   runs   trials   harness s   bare s"
        "   ratio (spread)     CPU/trial   peak RSS   bytes/trial   gc pauses"
    )
    figures = {}
    for count, runs, pairs in sizes:
        tasks = write_tasks(folder, count)
        rows: dict[str, list[tuple[dict[str, float], float]]] = {tree: [] for tree in trees}
        for _ in range(pairs):
            loop = bare(agent, count * runs, folder)
            for tree in trees:
                rows[tree].append((harness(agent, tasks, runs, None, folder, tree), loop))
        for tree in trees:
            ratios = [run["wall"] / loop for run, loop in rows[tree]]
            run, loop = sorted(rows[tree], key=lambda row: row[0]["wall"] / row[1])[len(ratios) // 2]
            if tree == ROOT:
                figures[(count, runs)] = run
            trials = count * runs
            print(
                f"            {label(tree) if len(trees) > 1 else ''}{count:>6} {runs:>6} {trials:>8}"
                f" {run['wall']:>11.2f} {loop:>8.2f}   {spread(ratios):<17} {run['cpu'] / trials * 1e6:>6.0f} us"
                f" {run['rss']:>7.1f} MB {run['bytes'] / trials:>10.0f}   {run['gc'] * 1000:>6.0f} ms"
            )
    return figures


def label(tree: str) -> str:
    """A checkout as the tables name it: its commit, or its folder's name; ten characters."""
    commit = subprocess.run(["git", "-C", tree, "rev-parse", "--short=7", "HEAD"], capture_output=True, text=True)
    name = commit.stdout.strip() if commit.returncode == 0 else os.path.basename(tree.rstrip(os.sep))
    return f"{name[:8]:<10}"


def memory(figures: dict[tuple[int, int], dict[str, float]], folder: str) -> None:
    """What a task definition costs (loaded in a process of its own), and what a trial adds beyond it."""
    probe = (
        "import gc, sys, tracemalloc; sys.path.insert(0, sys.argv[1]); from harness.taskfile import load_task_file; "
        "tracemalloc.start(); tasks = load_task_file(sys.argv[2]).tasks; gc.collect(); "
        "print(tracemalloc.get_traced_memory()[0] / len(tasks))"
    )
    per_task = float(
        subprocess.run(
            [PYTHON, "-c", probe, ROOT, write_tasks(folder, 50_000)], capture_output=True, text=True, check=True
        ).stdout
    )
    print(f"memory      a task definition, loaded: {per_task:.0f} bytes (50,000 tasks, what stays allocated)")
    if (10_000, 1) in figures and (10_000, 5) in figures:
        growth = (figures[(10_000, 5)]["rss"] - figures[(10_000, 1)]["rss"]) * 1024 * 1024 / 40_000
        print(
            f"            each trial beyond the definitions: {growth:.0f} bytes (10,000 tasks, runs 5 against runs 1)"
        )
    for key in ((10_000, 5), (50_000, 1)):
        if key in figures:
            trials = f"{key[0] * key[1]:,} trials ({key[0]:,} x {key[1]})"
            print(f"            peak RSS at {trials}: {figures[key]['rss']:.1f} MB")


def cold_start(folder: str, trees: list[str]) -> None:
    env = environment(EVAL_RESULTS=os.path.join(folder, "stub.json"), EVAL_CANARY="canary-bench")
    scripts = {tree: os.path.join(tree, "eval_agent.py") for tree in trees}
    for script in scripts.values():
        subprocess.run([PYTHON, script], env=env, stdout=subprocess.DEVNULL, check=True)  # warm the file cache
    floor: list[float] = []
    stub: dict[str, list[float]] = {tree: [] for tree in trees}
    for _ in range(20):
        floor.append(measured([PYTHON, "-c", "pass"], env, folder)[0])
        for tree, script in scripts.items():
            stub[tree].append(measured([PYTHON, script], env, folder)[0])
    for tree in trees:
        ratios = [s / f for s, f in zip(stub[tree], floor, strict=True)]
        print(
            f"cold start  {label(tree) if len(trees) > 1 else ''}python3 eval_agent.py on the stub:"
            f" {statistics.median(stub[tree]) * 1000:.0f} ms, python3 -c pass: {statistics.median(floor) * 1000:.0f}"
            f" ms, ratio {spread(ratios)}  (median of 20 interleaved; {PYTHON})"
        )
    base = _import_times([PYTHON, "-X", "importtime", "-c", "pass"], env, folder)
    ours = _import_times([PYTHON, "-X", "importtime", SCRIPT], env, folder)
    added = {name: times for name, times in ours.items() if name not in base}
    total = sum(own for own, _ in added.values())
    print(f"            imports beyond python3 -c pass: {len(added)} modules, {total / 1000:.1f} ms; the costliest:")
    for name, (own, cumulative) in sorted(added.items(), key=lambda item: -item[1][0])[:10]:
        print(f"              {own / 1000:5.1f} ms  {name}  (with what it imports: {cumulative / 1000:.1f} ms)")


def _import_times(argv: list[str], env: dict[str, str], folder: str) -> dict[str, tuple[int, int]]:
    stderr = subprocess.run(argv, env=env, cwd=folder, capture_output=True, text=True).stderr
    times = {}
    for line in stderr.splitlines():
        if line.startswith("import time:") and "self [us]" not in line:
            own, cumulative, name = (part.strip() for part in line[len("import time:") :].split("|"))
            times[name] = (int(own), int(cumulative))
    return times


BARE_CLIENTS = """
import http.client, json, sys, threading, time
port, count, concurrency = (int(arg) for arg in sys.argv[1:4])
body = json.dumps({"prompt": "Please echo number 0.", "taskId": "t0", "runId": "x"}).encode()
def client(n):
    conn = http.client.HTTPConnection("127.0.0.1", port)
    for _ in range(n):
        conn.request("POST", "/run", body, {"Content-Type": "application/json"})
        conn.getresponse().read()
started = time.perf_counter()
shares = [count // concurrency + (i < count % concurrency) for i in range(concurrency)]
threads = [threading.Thread(target=client, args=(share,)) for share in shares]
for thread in threads:
    thread.start()
for thread in threads:
    thread.join()
print(time.perf_counter() - started)
"""


def efficiency(agent: Agent, folder: str, repeats: int) -> None:
    """The harness against the ideal, and, for the ceiling the machine sets, bare http.client threads.

    The ideal is N x the latency the agent really gave / concurrency: its timer wakes up to a millisecond late (the
    event loop's resolution), which no client can win back.
    """
    agent.latency = 0.020
    count, concurrency = 2000, 32
    tasks = write_tasks(folder, count)
    inside, whole, ceiling, latencies = [], [], [], []
    for _ in range(repeats):
        agent.served, agent.answered = 0.0, 0
        run = harness(agent, tasks, 1, concurrency, folder)
        ideal = agent.served / concurrency
        latencies.append(agent.served / agent.answered * 1000)
        inside.append(ideal / run["run"])
        whole.append(ideal / run["wall"])
        agent.served, agent.answered = 0.0, 0
        argv = [PYTHON, "-c", BARE_CLIENTS, str(agent.port), str(count), str(concurrency)]
        elapsed = float(subprocess.run(argv, capture_output=True, text=True, check=True).stdout)
        ceiling.append(agent.served / concurrency / elapsed)
    agent.latency = 0.0
    print(
        f"efficiency  latency 20 ms (as given: {spread(latencies)} ms), N={count}, concurrency {concurrency},"
        f" {repeats} runs;\n            ideal time / the run's own time {spread(inside)}, / the whole process's"
        f" {spread(whole)};\n            {concurrency} bare http.client threads against the same agent, their loop"
        f" alone: {spread(ceiling)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="N = 1,000 and 10,000 only, fewer repeats")
    parser.add_argument("--against", action="append", default=[], metavar="TREE", help="another checkout's folder")
    args = parser.parse_args()
    quick = args.quick
    trees = [ROOT, *(os.path.abspath(tree) for tree in args.against)]
    for tree in trees:
        # The harness as it runs from its second time on: bytecode cached (this machine sets PYTHONDONTWRITEBYTECODE).
        subprocess.run([PYTHON, "-m", "compileall", "-q", "-x", r"[/\\]\.venv", tree], check=True)
    agent, threaded = Agent(), ThreadedAgent()
    sizes = [(1000, 1, 5), (1000, 5, 3), (10_000, 1, 3), (10_000, 5, 1)]
    sizes += [] if quick else [(50_000, 1, 1), (50_000, 5, 1)]
    with tempfile.TemporaryDirectory() as folder:
        figures = scaling(threaded, folder, sizes, trees)
        memory(figures, folder)
        cold_start(folder, trees)
        efficiency(agent, folder, 3 if quick else 10)


if __name__ == "__main__":
    main()
