"""Cold start of checkouts of the harness side by side: a stub run of each, interleaved, timed by the CPU it used, and
against the interpreter's own start (`python3 -c pass`).

Run: python3 bench/cold_start_ab.py BEFORE AFTER [MORE ...] [--pairs N]
     (each a folder that holds eval_agent.py, e.g. `git worktree add /tmp/before REV`)

On a shared machine wall time swings with the load; the CPU a process used (user and system, from wait4) swings less.
Each checkout is byte-compiled first, so that all are measured as they run from their second run on. A stub run takes
its settings from the environment (no flags: a run with flags also imports argparse), as `python3 eval_agent.py` does.
Prints, for the interpreter and each checkout, the minimum and the median of the CPU per run with its quartiles, over N
rounds after 5 rounds of warm-up; and each checkout's run over the interpreter's in the same round: its median and
quartiles.
"""

from __future__ import annotations

import argparse
import compileall
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile

FLOOR = "python3 -c pass"


def cpu_ms(argv: list[str], cwd: str, out: str) -> float:
    """The CPU, in milliseconds, of one run of argv, its settings without any of this environment's EVAL_ ones."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {name: value for name, value in os.environ.items() if not name.startswith("EVAL_")}
    subprocess.run(
        argv,
        cwd=cwd,
        env={**env, "EVAL_RESULTS": out},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime) * 1000


def spread(values: list[float]) -> str:
    low, _, high = statistics.quantiles(values, n=4)
    return f"{statistics.median(values):.2f} ({low:.2f}-{high:.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trees", nargs="+", metavar="TREE")
    parser.add_argument("--pairs", type=int, default=80, help="rounds measured (each runs every checkout once)")
    args = parser.parse_args()
    for tree in args.trees:
        compileall.compile_dir(tree, quiet=1, rx=re.compile(r"[/\\]\.venv|[/\\]tests"))
    samples: dict[str, list[float]] = {name: [] for name in (FLOOR, *args.trees)}
    with tempfile.TemporaryDirectory() as folder:
        out = os.path.join(folder, "r.json")
        for round_ in range(args.pairs + 5):
            runs = {FLOOR: cpu_ms([sys.executable, "-c", "pass"], folder, out)}
            for tree in args.trees:
                runs[tree] = cpu_ms([sys.executable, os.path.join(tree, "eval_agent.py")], tree, out)
            if round_ >= 5:
                for name, ms in runs.items():
                    samples[name].append(ms)
    floor = samples[FLOOR]
    for name, cpu in samples.items():
        low, _, high = statistics.quantiles(cpu, n=4)
        over = [ms / f for ms, f in zip(cpu, floor, strict=True)]
        ratio = "" if name == FLOOR else f"; over {FLOOR}: {spread(over)}"
        print(
            f"{name}: CPU per run min {min(cpu):.1f} ms, median {statistics.median(cpu):.1f} ms "
            f"({low:.1f}-{high:.1f}), {len(cpu)} runs{ratio}"
        )


if __name__ == "__main__":
    main()
