"""--runs auto against a fixed --runs 10: the mean trials spent and the wrong verdicts, on the same simulated tasks.

Run: python3 bench/adaptive_runs.py   (about a second)

10,000 tasks of known pass rates (a fixed seed): half reliable (60% of those always passing, the rest from 95% to
100%), a fifth broken (0 to 30%), the rest flaky (30% to 95%); tests/test_adaptive.py draws the same population. Each
task is repeated as --runs auto repeats it, by the harness's own decision function, and, on its own draws, 10 times.
A verdict is wrong when a task of pass rate at least the target (90%) is judged unreliable, or one at most the rate
"unreliable" means (50%) is judged reliable; tasks between are right either way. The fixed rule judges a task reliable
when its 10 trials pass at least 90% of the time; so does auto for a task its test left undecided at the most trials.
"""

from __future__ import annotations

import os
import random
import sys
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from harness.adaptive import CONTINUE, MOST, RELIABLE, Auto, sequential_test, verdict

TASKS = 10_000
SEED = 20261205


def population(rng: random.Random) -> float:
    """A task's pass rate, as tests/test_adaptive.py draws it."""
    draw = rng.random()
    if draw < 0.5:
        return 1.0 if rng.random() < 0.6 else rng.uniform(0.95, 1.0)
    if draw < 0.7:
        return rng.uniform(0.0, 0.3)
    return rng.uniform(0.3, 0.95)


def main() -> None:
    print(f"{TASKS:,} simulated tasks, seed {SEED}")
    columns = ("mean trials", 11), ("saved", 6), ("wrong", 7), ("reliable→unrel.", 16), ("unrel.→reliable", 16)
    print(f"{'rule':<34} " + " ".join(f"{name:>{width}}" for name, width in columns))
    for auto in (Auto(), Auto(confidence=Decimal(90)), Auto(confidence=Decimal(99)), Auto(most=20)):
        rng = random.Random(SEED)
        test = sequential_test(auto)
        target, low = float(auto.reliability) / 100, auto.unreliable
        tallies = {"auto": [0, 0, 0, 0, 0], "fixed": [0, 0, 0, 0, 0]}  # trials, wrong each way, undecided, tasks
        kinds = [0, 0]  # tasks at least the target, tasks at most the unreliable rate
        for _ in range(TASKS):
            rate = population(rng)
            passes = trials = 0
            while (said := verdict(test, passes, trials)) == CONTINUE:
                passes += rng.random() < rate
                trials += 1
            reliable = said == RELIABLE or (said == MOST and passes >= target * trials)
            fixed_passes = sum(rng.random() < rate for _ in range(auto.most))
            kinds[0] += rate >= target
            kinds[1] += rate <= low
            fixed = fixed_passes >= target * auto.most
            for name, spent, judged in (("auto", trials, reliable), ("fixed", auto.most, fixed)):
                tally = tallies[name]
                tally[0] += spent
                tally[1] += rate >= target and not judged
                tally[2] += rate <= low and judged
                tally[3] += name == "auto" and said == MOST
        for name, (spent, wrong_reliable, wrong_unreliable, undecided, _) in tallies.items():
            label = (
                f"auto:{auto.most}, {auto.confidence}% confidence" if name == "auto" else f"fixed --runs {auto.most}"
            )
            saved = 1 - spent / (auto.most * TASKS)
            print(
                f"{label:<34} {spent / TASKS:>11.2f} {saved:>6.0%} {(wrong_reliable + wrong_unreliable) / TASKS:>7.2%}"
                f" {wrong_reliable / kinds[0]:>16.2%} {wrong_unreliable / kinds[1]:>16.2%}"
                + (f"   ({undecided / TASKS:.1%} undecided at max)" if name == "auto" else "")
            )


if __name__ == "__main__":
    main()
