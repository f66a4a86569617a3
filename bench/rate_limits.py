"""A provider run against its rate limit: 1,000 tasks against the rate-limited fake (bench/ratelimited_provider.py) at
600 requests and 60,000 tokens a minute and 300 ms of model latency, at each concurrency ceiling from 4 to 64.

Run: python3 bench/rate_limits.py                      (about 6 minutes: 12 runs, 6 at a time)
     python3 bench/rate_limits.py --peers              (and promptfoo and inspect-ai, installed under /tmp: 14 minutes)
     python3 bench/rate_limits.py --harness PATH --fixed-rev REV --ceilings 4,64 --jobs 4
     python3 bench/rate_limits.py --bucket --ceilings '' --anthropic 16 --fixed-rev ''
                                                       (token buckets as Anthropic documents them, at ceiling 16)

Each run is the harness (or a peer) as a process of its own against a fake of its own, on a port of its own, so that
several run at once (--jobs) without sharing a budget: a run is bound by its fake's limits and the model's latency,
not by the CPU (ten requests a second). Runs:
  the harness at --harness (default: this checkout's eval_agent.py), openai at every ceiling, anthropic at --anthropic
  "fixed": the harness at --fixed-rev (default: main before issue 26's pacing), from a `git worktree` of that commit
  with --peers, promptfoo (npm) and inspect-ai (PyPI) at every ceiling, each with its documented rate-limit settings

The floor is what the limits allow: the tasks answered over the requests a second (1,000 / 10 = 100 s when none
failed; a failed task shortens the run, so it is left out of the floor too), or the tokens the fake charged for the
run's admitted requests over the tokens a second, whichever is longer; the fake enforces a minute's budget over a
sliding one-second window, so a burst cannot beat it by more than that second. With --bucket the fake holds each run
to three token buckets instead, as Anthropic documents its limits (requests, input tokens, output tokens a minute: by
default 600, 400,000 and 80,000; input tokens the wall at about 1,030 a request, the tools' definitions counted),
each full at the start and holding the minute's figure (--burst: the seconds of refill it holds); the floor is then
the longest of the requests, the input tokens and the output tokens charged, less what the full bucket held, over
their rates (the concurrency's own bound, the tasks over the ceiling's requests a latency, is below it at 16). Run it
on anthropic: OpenAI's headers have no input-tokens limit to pace by.
Targets (issue 26): wall <= 1.10x the floor, at most 1% of requests answered 429, no successful request sent again,
no task failed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ratelimited_provider import Counts, RateLimitedProvider, TokenBuckets

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = os.path.realpath(sys.executable)
TEN_TASKS = os.path.join(ROOT, "tests", "data", "tasks", "imageman-ten.json")
FIXED_REV = "65c8c533c7788ba131ca17547187a192db36d0ad"  # main before issue 26's pacing
MAX_RATIO, MAX_429_SHARE = 1.10, 0.01
PEERS_DIR = os.path.join(tempfile.gettempdir(), "ratebench-peers")


@dataclass(frozen=True)
class Limits:
    """What each fake holds a run to."""

    tasks: int
    requests_per_minute: int
    tokens_per_minute: int
    latency: float
    # Token buckets (input, output tokens a minute) instead of the sliding window, when set, holding `burst` seconds
    buckets: tuple[int, int] | None = None
    burst: float = 60.0

    def fake(self) -> RateLimitedProvider:
        if self.buckets is None:
            return RateLimitedProvider(self.requests_per_minute, self.tokens_per_minute, self.latency)
        limiter = TokenBuckets(self.requests_per_minute, *self.buckets, burst=self.burst)
        return RateLimitedProvider(latency=self.latency, limiter=limiter)

    def floor(self, counts: Counts) -> tuple[float, float]:
        """(the requests' floor, the tokens' floor) in seconds, for the tasks the run got answered: all of them when
        none failed (a task that gave up early shortens the run, not the time its answers took). Against buckets, each
        full at the start, what a limit charged less what its bucket held over its rate; the tokens' floor is the
        longer of the input's and the output's."""
        answered = counts.requests - counts.rate_limited - counts.resends
        if self.buckets is None:
            return answered / (self.requests_per_minute / 60), counts.tokens / (self.tokens_per_minute / 60)
        output = counts.tokens - counts.input_tokens
        floors = [
            max(0.0, charged - per_minute / 60 * self.burst) / (per_minute / 60)
            for charged, per_minute in [
                (answered, self.requests_per_minute),
                (counts.input_tokens, self.buckets[0]),
                (output, self.buckets[1]),
            ]
        ]
        return floors[0], max(floors[1:])


@dataclass(frozen=True)
class Run:
    """One run's figures, or why it did not run (`failure`)."""

    who: str
    backend: str
    ceiling: int
    wall: float = 0.0
    counts: Counts | None = None
    failed: int = 0
    failure: str = ""


Runner = Callable[[RateLimitedProvider, str, str, int], tuple[float, int]]  # (fake, tasks, folder, ceiling)


def write_tasks(folder: str, count: int) -> str:
    """`count` tasks: the ten canonical ones over and over, each with an id and a ticket number of its own (a fake
    that sees the same request twice counts a resend)."""
    with open(TEN_TASKS, encoding="utf-8") as f:
        ten = json.load(f)
    tasks = []
    for number in range(count):
        task = dict(ten["tasks"][number % len(ten["tasks"])])
        tasks.append({**task, "id": f"{task['id']}-{number:04d}", "prompt": f"{task['prompt']}\nTicket {number}."})
    path = os.path.join(folder, "tasks.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump({**ten, "tasks": tasks}, f)
    return path


def timed(
    argv: list[str], env: dict[str, str], folder: str, ok: Callable[[int], bool] = lambda code: code == 0
) -> float:
    """The wall time of one process run to its end; RuntimeError with its last words if it ended badly."""
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.perf_counter() - started
    if not ok(proc.returncode):
        raise RuntimeError(f"exit {proc.returncode}: {proc.stdout.strip()[-400:]}")
    return wall


def environment(**settings: str) -> dict[str, str]:
    """This environment without EVAL_* settings or proxies, plus `settings`."""
    proxies = {"http_proxy", "https_proxy", "all_proxy", "no_proxy"}
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVAL_") and k.lower() not in proxies}
    return {**env, **settings}


def harness(script: str, backend: str) -> Runner:
    """A run of the harness at `script` with a provider backend; exit 1 (the gate not met) is a run with failures."""

    def run(fake: RateLimitedProvider, tasks: str, folder: str, ceiling: int) -> tuple[float, int]:
        results = os.path.join(folder, "results.json")
        env = environment(
            EVAL_BACKEND=backend,
            EVAL_MODEL="fake-model",
            EVAL_TASKS=tasks,
            EVAL_RESULTS=results,
            EVAL_CONCURRENCY=str(ceiling),
            OPENAI_BASE_URL=f"{fake.url}/v1",
            OPENAI_API_KEY="bench",
            ANTHROPIC_BASE_URL=fake.url,
            ANTHROPIC_API_KEY="bench",
        )
        wall = timed([PYTHON, script], env, folder, lambda code: code in (0, 1))
        with open(results, encoding="utf-8") as f:
            document = json.load(f)
        return wall, document["total"] - document["passed"]

    return run


def measured(who: str, backend: str, runner: Runner, limits: Limits, ceiling: int) -> Run:
    """One run against a fake of its own, in a folder of its own."""
    with tempfile.TemporaryDirectory() as folder, limits.fake() as fake:
        tasks = write_tasks(folder, limits.tasks)
        try:
            wall, failed = runner(fake, tasks, folder, ceiling)
        except (RuntimeError, OSError, ValueError, KeyError) as exc:
            return Run(who, backend, ceiling, failure=str(exc))
        return Run(who, backend, ceiling, wall, fake.counts(), failed)


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def table(runs: list[Run], limits: Limits) -> None:
    print(
        "run                         ceiling   wall s  floor s (requests, tokens)  ratio  requests   429s  share"
        "  resends  failed  peak   wall   429s  resends  failed"
    )
    for run in runs:
        head = f"{run.who + ' ' + run.backend:<28}{run.ceiling:>7}"
        if run.counts is None:
            print(f"{head}   did not run: {run.failure}")
            continue
        counts = run.counts
        by_requests, by_tokens = limits.floor(counts)
        floor = max(by_requests, by_tokens)
        ratio = run.wall / floor
        share = counts.rate_limited / counts.requests if counts.requests else 0.0
        print(
            f"{head} {run.wall:>8.1f} {floor:>8.1f} ({by_requests:>6.1f}, {by_tokens:>5.1f})"
            f"      {ratio:>6.2f} {counts.requests:>9} {counts.rate_limited:>6}"
            f" {share:>6.1%} {counts.resends:>8} {run.failed:>7} {counts.peak_in_flight:>5}"
            f"   {verdict(ratio <= MAX_RATIO)}   {verdict(share <= MAX_429_SHARE)}   {verdict(counts.resends == 0):>4}"
            f"     {verdict(run.failed == 0)}"
        )


def fixed_checkout(rev: str, folder: str) -> str:
    """The harness at `rev`, checked out in a git worktree under `folder`; its eval_agent.py."""
    tree = os.path.join(folder, "fixed")
    subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", "-q", tree, rev], check=True)
    return os.path.join(tree, "eval_agent.py")


def short_rev(script: str) -> str:
    """The commit the harness at `script` is checked out at, short, with + when its files differ from it."""
    folder = os.path.dirname(os.path.abspath(script))
    rev = subprocess.run(["git", "-C", folder, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(["git", "-C", folder, "status", "--porcelain", "--untracked-files=no"], capture_output=True)
    return (rev.stdout.strip() or "?") + ("+" if dirty.stdout.strip() else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--harness", default=os.path.join(ROOT, "eval_agent.py"), metavar="PATH")
    parser.add_argument(
        "--fixed-rev", default=FIXED_REV, metavar="REV", help="the fixed-concurrency harness's commit ('': none)"
    )
    parser.add_argument("--ceilings", default="4,8,16,32,64", help="EVAL_CONCURRENCY of each run, comma-separated")
    parser.add_argument("--anthropic", default="16", help="the ceilings also run with the anthropic backend")
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--rpm", type=int, default=600, help="requests per minute")
    parser.add_argument("--tpm", type=int, default=60_000, help="tokens per minute (the sliding window)")
    parser.add_argument("--bucket", action="store_true", help="token buckets as Anthropic documents them")
    parser.add_argument("--itpm", type=int, default=400_000, help="input tokens per minute (--bucket)")
    parser.add_argument("--otpm", type=int, default=80_000, help="output tokens per minute (--bucket)")
    parser.add_argument("--burst", type=float, default=60.0, help="seconds of refill a bucket holds (--bucket)")
    parser.add_argument("--latency", type=float, default=0.3, help="the model's latency, in seconds")
    parser.add_argument("--jobs", type=int, default=6, help="runs at once, each against a fake of its own")
    parser.add_argument("--peers", action="store_true", help="also promptfoo and inspect-ai, where they install")
    parser.add_argument("--peers-dir", default=PEERS_DIR, help="where the peers are installed")
    args = parser.parse_args(argv)
    buckets = (args.itpm, args.otpm) if args.bucket else None
    limits = Limits(args.tasks, args.rpm, args.tpm, args.latency, buckets, args.burst)
    ceilings = [int(c) for c in args.ceilings.split(",") if c]
    anthropic = [int(c) for c in args.anthropic.split(",") if c]
    with tempfile.TemporaryDirectory() as folder:
        fixed = fixed_checkout(args.fixed_rev, folder) if args.fixed_rev else None
        try:
            scripts = [(f"harness {short_rev(args.harness)}", args.harness)]
            scripts += [(f"fixed {short_rev(fixed)}", fixed)] if fixed else []
            plan: list[tuple[str, str, Runner, int]] = []
            for who, script in scripts:
                plan += [(who, "openai", harness(script, "openai"), c) for c in ceilings]
                plan += [(who, "anthropic", harness(script, "anthropic"), c) for c in anthropic]
            notes: list[str] = []
            if args.peers:
                from peers import peer_runners

                for who, runner, note in peer_runners(args.peers_dir):
                    notes.append(f"{who}: {note}")
                    plan += [(who, "openai", runner, c) for c in ceilings] if runner else []
            if limits.buckets is None:
                held = f"{limits.tokens_per_minute} tokens a minute (a sliding one-second window)"
            else:
                held = (
                    f"{limits.buckets[0]} input and {limits.buckets[1]} output tokens a minute (token buckets"
                    f" holding {limits.burst:g} s of refill)"
                )
            print(
                f"rate limits  {limits.tasks} tasks, {limits.requests_per_minute} requests and {held},"
                f" {limits.latency * 1000:.0f} ms of model latency; {len(plan)} runs, {args.jobs} at once",
                flush=True,
            )
            progress = threading.Lock()

            def one(item: tuple[str, str, Runner, int]) -> Run:
                run = measured(item[0], item[1], item[2], limits, item[3])
                with progress:
                    print(f"  done: {run.who} {run.backend} at {run.ceiling}", file=sys.stderr, flush=True)
                return run

            with ThreadPoolExecutor(args.jobs) as pool:
                runs = list(pool.map(one, plan))
        finally:
            if fixed:
                subprocess.run(
                    ["git", "-C", ROOT, "worktree", "remove", "--force", os.path.dirname(fixed)], check=False
                )
    table(runs, limits)
    for note in notes:
        print(note)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
