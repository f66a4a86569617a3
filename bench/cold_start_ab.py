"""Cold start of two checkouts of the harness side by side: a stub run of each, interleaved, timed by the CPU it used.

Run: python3 bench/cold_start_ab.py BEFORE AFTER [--pairs N]
     (BEFORE, AFTER: folders that hold eval_agent.py, e.g. `git worktree add /tmp/before REV`)

On a shared machine wall time swings with the load; the CPU a process used (user and system, from wait4) swings less.
Each checkout is byte-compiled first, so that both are measured as they run from their second run on. Prints, for each,
the minimum and the median of the CPU per run with its quartiles, over N pairs after 5 pairs of warm-up.
"""

from __future__ import annotations

import argparse
import compileall
import os
import resource
import statistics
import subprocess
import sys
import tempfile


def cpu_ms(tree: str, out: str) -> float:
    """The CPU, in milliseconds, of one stub run of the harness in `tree`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {name: value for name, value in os.environ.items() if not name.startswith("EVAL_")}
    subprocess.run(
        [sys.executable, os.path.join(tree, "eval_agent.py"), "--out", out],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs=2, metavar="TREE")
    parser.add_argument("--pairs", type=int, default=80)
    args = parser.parse_args()
    for tree in args.trees:
        compileall.compile_dir(tree, quiet=1, rx=__import__("re").compile(r"[/\\]\.venv|[/\\]tests"))
    samples: dict[str, list[float]] = {tree: [] for tree in args.trees}
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "r.json")
        for pair in range(args.pairs + 5):
            for tree in args.trees:
                ms = cpu_ms(tree, out)
                if pair >= 5:
                    samples[tree].append(ms)
    for tree, cpu in samples.items():
        low, _, high = statistics.quantiles(cpu, n=4)
        print(
            f"{tree}: CPU per stub run min {min(cpu):.1f} ms, median {statistics.median(cpu):.1f} ms "
            f"({low:.1f}-{high:.1f}), {len(cpu)} runs"
        )


if __name__ == "__main__":
    main()
