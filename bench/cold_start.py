"""Cold-start wall time of a whole stub run, against `python3 -c pass` as the floor.

Run: python3 bench/cold_start.py [RUNS]
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def median_wall_ms(argv: list[str], runs: int, cwd: str) -> float:
    """Median wall time of running argv to completion, in milliseconds."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, cwd=cwd, check=True, stdout=subprocess.DEVNULL)
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


def cold_start_figures(runs: int) -> tuple[float, float]:
    """(harness on the stub, python3 -c pass), median milliseconds each."""
    with tempfile.TemporaryDirectory() as tmp:
        harness = median_wall_ms([sys.executable, os.path.join(ROOT, "eval_agent.py")], runs, tmp)
        floor = median_wall_ms([sys.executable, "-c", "pass"], runs, tmp)
    return harness, floor


def main() -> None:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    harness, floor = cold_start_figures(runs)
    print(f"stub run, 10 tasks, cold start: {harness:.0f} ms median of {runs} (python3 -c pass: {floor:.0f} ms)")


if __name__ == "__main__":
    main()
