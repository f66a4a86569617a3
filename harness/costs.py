"""What a run cost, per task and overall, then and now: tokens, tool calls, steps and latency; and how much each grew
against a baseline, over the tasks both runs measured alike, for the growth limits (--max-token-growth ...)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from math import ceil
from typing import Any

from harness.records import ConfigError, Figure, Growth, record
from harness.text import GROWTH_FIGURES

# The figures compared overall, in the order reports show them: the key in the results file -> what a person calls it.
OVERALL_FIGURES = {
    "tokens": "tokens",
    "toolCalls": "tool calls",
    "steps": "steps",
    "latencyMs": "latency",
    "latencyMedianMs": "latency median",
    "latencyP95Ms": "latency p95",
}
# The figures of one task, as `compare --out` lists them: the key -> TaskCost's attribute.
TASK_FIGURES = {
    "tokens": "tokens",
    "toolCalls": "tool_calls",
    "steps": "steps",
    "latencyMs": "latency_ms",
    "latencyMedianMs": "latency_median_ms",
    "latencyP95Ms": "latency_p95_ms",
}


@record
class TaskCost:
    """What one task cost a trial, a mean over its trials, and each trial's latency (sorted) for its median and p95."""

    # Exact, as latency_ms is, so that a growth of exactly a limit is not over it: 4 calls in 5 trials against 2 in 3
    # is +20%.
    tokens: Fraction | None  # input + output, over the trials that reported usage; None when none did
    tool_calls: Fraction
    steps: Fraction
    latencies_ms: tuple[float, ...]

    @property
    def latency_ms(self) -> Fraction:
        """The mean, exactly, of each trial's durationMs as the results keep it (1.8 is 9/5, not the float's)."""
        return sum((Fraction(repr(ms)) for ms in self.latencies_ms), Fraction(0)) / len(self.latencies_ms)

    @property
    def latency_median_ms(self) -> float:
        return median(self.latencies_ms)

    @property
    def latency_p95_ms(self) -> float:
        return p95(self.latencies_ms)


@record
class CostComparison:
    """The cost of the tasks both runs measured alike: each task's then and now, and each overall figure's."""

    tasks: list[tuple[str, TaskCost, TaskCost]]  # id, then, now
    overall: dict[str, tuple[Figure | None, Figure | None]]  # OVERALL_FIGURES key -> then, now (None: not recorded)
    token_tasks: int  # of those tasks, how many recorded tokens in both runs: the token totals are over these


def task_cost(trials: Sequence[Mapping[str, Any]]) -> TaskCost:
    """A task's cost per trial, from its trials as the results file keeps them."""
    used = [trial["usage"]["inputTokens"] + trial["usage"]["outputTokens"] for trial in trials if trial["usage"]]
    return TaskCost(
        tokens=Fraction(sum(used), len(used)) if used else None,
        tool_calls=Fraction(sum(len(trial["toolCalls"]) for trial in trials), len(trials)),
        steps=Fraction(sum(trial.get("steps", 1) for trial in trials), len(trials)),
        latencies_ms=tuple(sorted(trial["durationMs"] for trial in trials)),
    )


def cost_of(entry: Mapping[str, Any]) -> TaskCost | None:
    """A task entry's cost: from its trials, or what a run's brief of it kept (`cost`); None when it has neither."""
    if "trialResults" in entry:
        return task_cost(entry["trialResults"])
    cost = entry.get("cost")
    return cost if isinstance(cost, TaskCost) else None


def median(values: Sequence[float]) -> float:
    """The median of sorted values (statistics is not imported for it: it would add to every run's start)."""
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def p95(values: Sequence[float]) -> float:
    """The 95th percentile of sorted values by nearest rank: the smallest value at least 95% of them are at most."""
    return values[ceil(len(values) * 95 / 100) - 1]


def compare_costs(pairs: Iterable[tuple[str, TaskCost, TaskCost]], by_task: bool = False) -> CostComparison:
    """The overall figures of the tasks given, then and now: tokens, tool calls, steps and latency summed over the
    tasks' means per trial (so that runs of different --runs compare), latency's median and p95 over every trial;
    by_task (a side ran --runs auto, its tasks each their own number of trials): each task's trials weighing alike."""
    tasks = list(pairs)
    both = [(then, now) for _, then, now in tasks if then.tokens is not None and now.tokens is not None]
    overall: dict[str, tuple[Figure | None, Figure | None]] = {
        "tokens": _tokens(tasks, both),
        "toolCalls": _sums(tasks, lambda cost: cost.tool_calls),
        "steps": _sums(tasks, lambda cost: cost.steps),
        "latencyMs": _sums(tasks, lambda cost: cost.latency_ms),
    }
    for key, of, share in (("latencyMedianMs", median, Fraction(1, 2)), ("latencyP95Ms", p95, Fraction(95, 100))):
        if not tasks:
            overall[key] = (None, None)
        elif by_task:  # over every trial, a task that ran longer would weigh more on one side than on the other
            overall[key] = (
                _weighted((then.latencies_ms for _, then, _ in tasks), share),
                _weighted((now.latencies_ms for *_, now in tasks), share),
            )
        else:
            sides = (
                [t for _, then, _ in tasks for t in then.latencies_ms],
                [t for *_, now in tasks for t in now.latencies_ms],
            )
            overall[key] = (of(sorted(sides[0])), of(sorted(sides[1])))
    return CostComparison(tasks, overall, len(both))


def _weighted(latencies: Iterable[Sequence[float]], share: Fraction) -> float:
    """The smallest latency that `share` of the tasks' trials are at most, each task's trials weighing one in all."""
    weighed = sorted((ms, Fraction(1, len(trials))) for trials in latencies for ms in trials)
    needed, held = share * sum(weight for _, weight in weighed), Fraction(0)
    for ms, weight in weighed:
        held += weight
        if held >= needed:
            return ms
    return weighed[-1][0]


def _sums(tasks: Sequence[tuple[str, TaskCost, TaskCost]], of: Any) -> tuple[Figure | None, Figure | None]:
    if not tasks:
        return None, None
    return sum(of(then) for _, then, _ in tasks), sum(of(now) for *_, now in tasks)


def _tokens(
    tasks: Sequence[tuple[str, TaskCost, TaskCost]], both: Sequence[tuple[TaskCost, TaskCost]]
) -> tuple[Figure | None, Figure | None]:
    """Tokens then and now over the tasks that recorded them in both runs; with none such, each run's own (or None)."""
    if both:
        return sum(then.tokens or 0 for then, _ in both), sum(now.tokens or 0 for _, now in both)
    then = [cost.tokens for _, cost, _ in tasks if cost.tokens is not None]
    now = [cost.tokens for *_, cost in tasks if cost.tokens is not None]
    return (sum(then) if then else None), (sum(now) if now else None)


def growths(costs: CostComparison, limits: Mapping[str, Decimal]) -> tuple[Growth, ...]:
    """Each figure a growth limit applies to, measured, with its limit (None: no limit set)."""
    return tuple(
        Growth(
            figure=key,
            then=costs.overall[key][0],
            now=costs.overall[key][1],
            limit=limits.get(key),
            tasks=costs.token_tasks if key == "tokens" else len(costs.tasks),
        )
        for key, _ in GROWTH_FIGURES.values()
    )


def require_tokens(path: str, document: Mapping[str, Any], limit: str) -> None:
    """ConfigError, naming the file and the limit, when a token growth limit is set on a results file that recorded no
    tokens: the limit could never be checked, and is not passed unseen."""
    if not any(trial["usage"] for entry in document["results"] for trial in entry["trialResults"]):
        raise ConfigError(
            f"{limit}: {path} recorded no tokens (its backend reported no usage), so token growth cannot be measured"
            " against it"
        )
