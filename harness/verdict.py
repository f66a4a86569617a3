"""The verdict, in one place: trials counted, pass^k, the gate decided with every reason it failed, the exit code."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from math import comb
from typing import Any

from harness.records import CategoryCount, GateOn, Summary, Tally

EXIT_GATE_MET, EXIT_GATE_FAILED, EXIT_CONFIG, EXIT_UNREACHABLE, EXIT_INTERNAL, EXIT_INTERRUPTED = 0, 1, 2, 3, 4, 130
EXIT_CODES = (
    "0 gate met, 1 gate not met, 2 usage or configuration error, 3 agent unreachable, "
    "4 internal error (a bug in the harness), 130 interrupted"
)
# Error codes that mean the agent was never really asked: when every trial ends in one, nothing was evaluated.
UNREACHABLE = frozenset({"reply:connect", "reply:tls", "reply:auth", "reply:key-rejected"})


def tally(entry: Mapping[str, Any]) -> Tally:
    """What the verdict counts of one task, from its entry in the results: a run's and a merge's alike."""
    trials = entry["trialResults"]
    return Tally(
        entry["id"],
        entry["category"],
        tuple(trial["status"] for trial in trials),
        blocking=entry["blocking"],
        violation=entry["violation"] is not None,
        # A conversation that failed after its first step got answers: the agent was reached.
        unreached=all(trial["code"] in UNREACHABLE and trial.get("steps", 1) == 1 for trial in trials),
        tokens=total_tokens(
            [
                (trial["usage"]["inputTokens"], trial["usage"]["outputTokens"]) if trial["usage"] else None
                for trial in trials
            ]
        ),
        latency_ms=sum(trial["durationMs"] for trial in trials),
    )


def decide(
    tallies: Sequence[Tally],
    gate: Decimal,
    *,
    runs: int = 1,
    gate_on: GateOn = "trials",
    not_run: int = 0,
    regressed: Sequence[str] = (),
    interrupted: bool = False,
    internal_error: str | None = None,
) -> Summary:
    """Count trials overall and per category, compute pass^k and flaky tasks, decide the gate, say why, pick the exit.

    The gate fails when the rate is below it, a blocking task did not pass, a task regressed against the baseline,
    nothing reached the agent, a task did not run, or a bug cut the run short: each reason is listed.
    """
    statuses = [status for tally in tallies for status in tally.statuses]
    passed = statuses.count("pass")
    errored = statuses.count("error")
    counts = [
        (tally.statuses.count("pass"), len(tally.statuses)) for tally in tallies
    ]  # (passing trials, trials) per task
    per_category: dict[str, list[int]] = {}
    for tally, (c, n) in zip(tallies, counts, strict=True):
        total = per_category.setdefault(tally.category, [0, 0])
        total[0] += c
        total[1] += n
    pass_all_k = {k: pass_hat_k(counts, k) for k in range(1, runs + 1)}
    rate = pass_all_k.get(runs, Fraction(0)) if gate_on == "pass-all" else Fraction(passed, len(statuses) or 1)
    blocking_failed = tuple(t.task_id for t, (c, n) in zip(tallies, counts, strict=True) if t.blocking and c < n)
    unreachable = bool(tallies) and all(t.unreached for t in tallies)
    reasons = {
        "below-gate": rate * 100 < Fraction(gate),
        "blocking-failed": bool(blocking_failed),
        "regression": bool(regressed),
        "unreachable": unreachable,
        "not-run": not_run > 0 or not statuses,
        "internal-error": internal_error is not None,
    }
    because = tuple(reason for reason, applies in reasons.items() if applies)
    if internal_error is not None:
        exit_code = EXIT_INTERNAL
    elif interrupted:
        exit_code = EXIT_INTERRUPTED
    elif unreachable:
        exit_code = EXIT_UNREACHABLE
    else:
        exit_code = EXIT_GATE_FAILED if because else EXIT_GATE_MET
    return Summary(
        passed=passed,
        failed=len(statuses) - passed - errored,
        errored=errored,
        total=len(statuses),
        gate=gate,
        gate_passed=not because,
        exit_code=exit_code,
        by_category={name: CategoryCount(c, n) for name, (c, n) in per_category.items()},
        gate_failed_because=because,
        not_run=not_run,
        runs=runs,
        gate_on=gate_on,
        pass_all_k=pass_all_k,
        flaky=tuple(t.task_id for t, (c, n) in zip(tallies, counts, strict=True) if 0 < c < n),
        blocking_failed=blocking_failed,
        violations=tuple(t.task_id for t in tallies if t.violation),
        regressed=tuple(regressed),
        internal_error=internal_error,
        tokens=total_tokens([t.tokens for t in tallies]),
        latency_ms=sum(t.latency_ms for t in tallies),
    )


def total_tokens(counts: Sequence[tuple[int, int] | None]) -> tuple[int, int] | None:
    """(input, output) tokens summed over what was reported; None when nothing was."""
    reported = [count for count in counts if count is not None]
    return (sum(c[0] for c in reported), sum(c[1] for c in reported)) if reported else None


def pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> Fraction:
    """pass^k (tau-bench): the mean over tasks of C(c, k) / C(n, k), c passing trials of n (tasks of fewer left out)."""
    # Tasks with the same number of trials share a denominator: add their numerators first, exactly.
    numerators: dict[int, int] = {}
    for c, n in counts:
        if n >= k:
            numerators[n] = numerators.get(n, 0) + comb(c, k)
    tasks = sum(1 for _, n in counts if n >= k)
    return (
        sum((Fraction(total, comb(n, k)) for n, total in numerators.items()), Fraction(0)) / tasks
        if tasks
        else Fraction(0)
    )
