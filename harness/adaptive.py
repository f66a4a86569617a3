"""--runs auto: a task repeated until a sequential test settles whether it passes reliably, or its most trials are
spent.

Wald's sequential probability ratio test between "reliable" (a pass rate of at least the target R) and "unreliable"
(odds of a pass at most a ninth of R's: at R = 90%, a pass rate of at most 50%), truncated at the most trials. The
log-likelihood ratio of unreliable to reliable after c passes of n trials is c * ln(p1/R) + (n - c) * ln((1-p1)/(1-R));
the test says unreliable once it reaches ln(1/alpha) and reliable once it falls to ln(alpha), alpha = 1 - confidence.
The likelihood ratio is a martingale of mean 1 under either hypothesis, so (Ville's inequality) the chance that it ever
crosses the far boundary is at most alpha: a task of pass rate R or more is judged unreliable, or one of p1 or less
judged reliable, with probability at most alpha, however the test is truncated. Between p1 and R (the indifference
region) either verdict may come. Pure arithmetic: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from math import log
from typing import Any

from harness.records import record

DEFAULT_MOST = 10
DEFAULT_CONFIDENCE = Decimal(95)
DEFAULT_RELIABILITY = Decimal(90)
# How far below the target "unreliable" is, as a ratio of the odds of a pass: 9 makes 90% against 50%, the region where
# 10 trials cannot tell either, and spends about 6 trials on a task that always passes and 2 on one that always fails.
ODDS_RATIO = 9
CONTINUE, RELIABLE, UNRELIABLE, MOST = "continue", "reliable", "unreliable", "max"
CUT_SHORT = "cut-short"  # a task the run stopped before its test did (Ctrl-C, a rejected key, the rate limits, a bug)


@record
class Auto:
    """--runs auto: the most trials a task may have, the confidence and the reliability target, in percent."""

    most: int = DEFAULT_MOST
    confidence: Decimal = DEFAULT_CONFIDENCE
    reliability: Decimal = DEFAULT_RELIABILITY

    @property
    def unreliable(self) -> float:
        """The pass rate p1 that "unreliable" means: odds of a pass ODDS_RATIO times below the target's."""
        odds = float(self.reliability) / (100 - float(self.reliability)) / ODDS_RATIO
        return odds / (1 + odds)

    def written(self) -> dict[str, float | int]:
        """As the results file keeps the settings."""
        return {"max": self.most, "confidence": float(self.confidence), "reliability": float(self.reliability)}

    @classmethod
    def read(cls, settings: Mapping[str, Any]) -> Auto:
        """The settings as written() gave them to the results file."""
        return cls(settings["max"], Decimal(str(settings["confidence"])), Decimal(str(settings["reliability"])))


@record
class Test:
    """The test's steps and boundaries, worked out once for a run."""

    pass_step: float  # what a pass adds to the log-likelihood ratio (below 0)
    fail_step: float  # what a fail or an error adds (above 0)
    upper: float  # unreliable at or above it
    lower: float  # reliable at or below it
    most: int


def sequential_test(auto: Auto) -> Test:
    """The test for these settings."""
    p0, p1, alpha = float(auto.reliability) / 100, auto.unreliable, 1 - float(auto.confidence) / 100
    return Test(log(p1 / p0), log((1 - p1) / (1 - p0)), log(1 / alpha), log(alpha), auto.most)


def verdict(test: Test, passes: int, trials: int) -> str:
    """After `passes` of `trials` (in trial order): continue, reliable, unreliable, or max (the most trials spent)."""
    ratio = passes * test.pass_step + (trials - passes) * test.fail_step
    if ratio >= test.upper:
        return UNRELIABLE
    if ratio <= test.lower:
        return RELIABLE
    return MOST if trials >= test.most else CONTINUE


def fewest_further(test: Test, passes: int, trials: int) -> int:
    """The fewest further trials before any verdict is possible: what a task may have in flight at once, as the test
    would send each of them whatever the others answer. Passes only lead the fastest to reliable, fails to unreliable;
    a mix to neither sooner."""
    if verdict(test, passes, trials) != CONTINUE:
        return 0
    for further in range(1, test.most - trials):
        if {verdict(test, passes + further, trials + further), verdict(test, passes, trials + further)} != {CONTINUE}:
            return further
    return test.most - trials


def spared(settings: Mapping[str, Any], shapes: Mapping[tuple[int, int], int]) -> int:
    """The trials a fixed run of the most would have sent beyond those spent on the tasks the test settled, from
    --runs auto's settings as the results keep them and (passes, trials) -> how many tasks; a task the run cut short
    spared none: its test had not settled it."""
    test = sequential_test(Auto.read(settings))
    return sum((test.most - n) * like for (c, n), like in shapes.items() if verdict(test, c, n) != CONTINUE)


def unsettled(auto: Auto) -> list[str]:
    """Warnings for settings under which the test cannot settle a task reliable, or unreliable, within its most trials
    (passes in a row are the fastest to reliable, fails to unreliable): such a task runs them all, as in a fixed run."""
    test = sequential_test(auto)
    said = (
        f"--runs auto:{auto.most} at {auto.reliability}% reliability and {auto.confidence}% confidence cannot settle a"
        f" task"
    )
    within = f"within {test.most} trial{'s' if test.most > 1 else ''}"
    return [
        f"{said} {what} {within}: a task that {does} runs all {test.most}"
        for what, does, passes in ((RELIABLE, "passes", test.most), (UNRELIABLE, "fails", 0))
        if verdict(test, passes, test.most) != what
    ]


def settled_by(test: Test, statuses: Sequence[str]) -> str | None:
    """What the test would have settled these trials as, read in order as --runs auto reads a task's (reliable or
    unreliable, at the first that settles them), or None when none does before the most trials or their end."""
    passes = 0
    for trials, status in enumerate(statuses, 1):
        passes += status == "pass"
        said = verdict(test, passes, trials)
        if said != CONTINUE:
            return None if said == MOST else said
    return None


def stopped_because(test: Test, statuses: Sequence[str]) -> dict[str, Any]:
    """A task's entry's "adaptive": its trials and why they stopped (reliable, unreliable, max, or cut-short: the run
    was, before the test settled it)."""
    said = verdict(test, statuses.count("pass"), len(statuses))
    return {"trials": len(statuses), "stoppedBecause": CUT_SHORT if said == CONTINUE else said}
