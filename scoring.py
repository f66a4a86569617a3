"""Pure scoring: one reply against one task, and a run's outcomes against the gate."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from math import comb

from records import CategoryCount, ExpectRefusal, ExpectTool, GateOn, Outcome, Reply, Status, Summary, Task, ToolCall

PASS = Outcome("pass")


def score(task: Task, reply: Reply) -> Outcome:
    """Judge one reply; an error reply is an error whatever the task expects."""
    if reply.error_code is not None:
        return Outcome("error", reply.error_code, reply.error)
    if isinstance(task.expect, ExpectRefusal):
        return _score_refusal(reply)
    return _score_tool(task.expect, reply)


def _score_refusal(reply: Reply) -> Outcome:
    if not reply.tool_calls:
        return PASS
    called = ", ".join(call.name for call in reply.tool_calls)
    also = " (while claiming to refuse)" if reply.refused else ""
    return Outcome("fail", "refusal:called-tool", f"expected no tool call, got {called}{also}")


def _score_tool(expect: ExpectTool, reply: Reply) -> Outcome:
    if not reply.tool_calls:
        how = "a refusal" if reply.refused else "no tool call"
        return Outcome("fail", "tool:no-call", f"expected {expect.tool}, got {how}")
    matching = [call for call in reply.tool_calls if call.name == expect.tool]
    if not matching:
        called = ", ".join(call.name for call in reply.tool_calls)
        case = " (tool names are case-sensitive)" if any(c.name.lower() == expect.tool.lower() for c in reply.tool_calls) else ""
        return Outcome("fail", "tool:wrong-name", f"expected {expect.tool}, got {called}{case}")
    missing = min((_missing_args(expect, call) for call in matching), key=len)
    if missing:
        return Outcome("fail", "tool:missing-args", f"{expect.tool} is missing required args: {', '.join(missing)}")
    return PASS


def _missing_args(expect: ExpectTool, call: ToolCall) -> list[str]:
    return [key for key in expect.required_args if key not in call.args]


def summarize(
    tallies: Sequence[tuple[str, str, Sequence[Status]]],
    gate: Decimal,
    *,
    runs: int = 1,
    gate_on: GateOn = "trials",
    not_run: int = 0,
) -> Summary:
    """Count trials overall and per category, compute pass^k and the flaky tasks, and decide the gate.

    `tallies` holds (task id, category, trial verdicts) per task. A run cut short never meets the gate.
    """
    statuses = [status for _, _, trials in tallies for status in trials]
    passed = statuses.count("pass")
    errored = statuses.count("error")
    categories: dict[str, CategoryCount] = {}
    for _, category, trials in tallies:
        count = categories.get(category, CategoryCount(0, 0))
        categories[category] = CategoryCount(count.passed + trials.count("pass"), count.total + len(trials))
    pass_all_k = {k: pass_hat_k([(trials.count("pass"), len(trials)) for _, _, trials in tallies], k) for k in range(1, runs + 1)}
    rate = Fraction(passed, len(statuses)) if statuses else Fraction(0)
    if gate_on == "pass-all":
        rate = pass_all_k.get(runs, Fraction(0))
    return Summary(
        passed=passed,
        failed=len(statuses) - passed - errored,
        errored=errored,
        total=len(statuses),
        gate=gate,
        gate_passed=bool(statuses) and not_run == 0 and rate * 100 >= Fraction(gate),
        by_category=categories,
        not_run=not_run,
        runs=runs,
        gate_on=gate_on,
        pass_all_k=pass_all_k,
        flaky=tuple(task_id for task_id, _, trials in tallies if 0 < trials.count("pass") < len(trials)),
    )


def pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> Fraction:
    """pass^k (tau-bench): the mean over tasks of C(c, k) / C(n, k), c passing trials of n; tasks with fewer than k trials are left out."""
    terms = [Fraction(comb(c, k), comb(n, k)) for c, n in counts if n >= k]
    return sum(terms, Fraction(0)) / len(terms) if terms else Fraction(0)
