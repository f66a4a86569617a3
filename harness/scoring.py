"""Pure scoring: one reply against one task, and a run's outcomes against the gate."""

from __future__ import annotations

import json
from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction
from math import comb
from typing import Any

from harness.records import CategoryCount, ExpectRefusal, ExpectTool, ExpectTrajectory, GateOn, Outcome, Reply, Summary, Tally, Task, ToolCall

PASS = Outcome("pass")
FORBIDDEN_TOOL = "forbidden-tool"


def score(task: Task, reply: Reply) -> Outcome:
    """Judge one reply; an error reply is an error whatever the task expects."""
    if reply.error_code is not None:
        return Outcome("error", reply.error_code, reply.error)
    expect = task.expect
    if isinstance(expect, ExpectRefusal):
        return _score_refusal(reply)
    forbidden = [call for call in reply.tool_calls if call.name in expect.forbidden_tools]
    if forbidden:
        calls = ", ".join(f"{call.name}({', '.join(call.args)})" for call in forbidden)
        return Outcome("fail", "tool:forbidden", f"called forbidden {calls}", FORBIDDEN_TOOL)
    if not reply.tool_calls:
        wanted = expect.tool if isinstance(expect, ExpectTool) else f"the calls {', '.join(step.tool for step in expect.steps)}"
        return Outcome("fail", "tool:no-call", f"expected {wanted}, got {'a refusal' if reply.refused else 'no tool call'}")
    if isinstance(expect, ExpectTrajectory):
        return _score_trajectory(expect, reply.tool_calls)
    return _score_tool(expect, reply.tool_calls)


def _score_refusal(reply: Reply) -> Outcome:
    if not reply.tool_calls:
        return PASS
    called = ", ".join(call.name for call in reply.tool_calls)
    also = " (while claiming to refuse)" if reply.refused else ""
    return Outcome("fail", "refusal:called-tool", f"expected no tool call, got {called}{also}", FORBIDDEN_TOOL)


def _score_tool(expect: ExpectTool, calls: Sequence[ToolCall]) -> Outcome:
    matching = [call for call in calls if call.name == expect.tool]
    if not matching:
        called = ", ".join(call.name for call in calls)
        case = " (tool names are case-sensitive)" if any(c.name.lower() == expect.tool.lower() for c in calls) else ""
        return Outcome("fail", "tool:wrong-name", f"expected {expect.tool}, got {called}{case}")
    problems = []
    for call in matching:
        problem = call_problem(expect, call)
        if problem is None:
            return PASS
        problems.append((problem, _missing_count(expect, call)))
    (code, reason), _ = min(problems, key=lambda pn: (PROBLEM_RANK.index(pn[0][0]), pn[1]))
    return Outcome("fail", code, reason)


def _missing_count(expect: ExpectTool, call: ToolCall) -> int:
    return sum(key not in call.args for key in (*expect.required_args, *expect.arg_values))


# Of several calls to the expected tool, the nearest miss explains the failure best.
PROBLEM_RANK = ("tool:wrong-value", "tool:missing-args", "tool:bad-args")


def call_problem(expect: ExpectTool, call: ToolCall) -> tuple[str, str] | None:
    """Why a call to the expected tool does not do what the task expects: (code, reason), or None when it does."""
    if call.args_error is not None:
        return "tool:bad-args", f"{expect.tool} {call.args_error}"
    missing = [key for key in (*expect.required_args, *expect.arg_values) if key not in call.args]
    if missing:
        return "tool:missing-args", f"{expect.tool} is missing required args: {', '.join(dict.fromkeys(missing))}"
    for key, match in expect.arg_values.items():
        value = call.args[key]
        if not any(json_equal(value, accepted, match.ignore_case) for accepted in match.values):
            accepted = " or ".join(json.dumps(v, ensure_ascii=False) for v in match.values)
            case = " (ignoring case)" if match.ignore_case else ""
            return "tool:wrong-value", f"{expect.tool} {key} is {json.dumps(value, ensure_ascii=False)}, expected {accepted}{case}"
    return None


def json_equal(a: Any, b: Any, ignore_case: bool = False) -> bool:
    """JSON equality: 1 equals 1.0 but never true; strings compared case-insensitively when asked."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a.casefold() == b.casefold() if ignore_case else a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(json_equal(x, y, ignore_case) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(json_equal(a[k], b[k], ignore_case) for k in a)
    return a is None and b is None


def _score_trajectory(expect: ExpectTrajectory, calls: Sequence[ToolCall]) -> Outcome:
    steps = expect.steps
    if expect.order == "exact":
        if len(calls) != len(steps):
            wanted = ", ".join(step.tool for step in steps)
            got = ", ".join(call.name for call in calls)
            return Outcome("fail", "trajectory:length", f"expected exactly {len(steps)} calls ({wanted}), got {len(calls)} ({got})")
        for number, (step, call) in enumerate(zip(steps, calls), 1):
            if call.name != step.tool:
                return Outcome("fail", "trajectory:step", f"step {number}: expected {step.tool}, got {call.name}")
            problem = call_problem(step, call)
            if problem is not None:
                return Outcome("fail", "trajectory:step", f"step {number}: {problem[1]}")
        return PASS
    if expect.order == "in-order":
        position = 0
        for number, step in enumerate(steps, 1):
            found, near = None, None
            for index in range(position, len(calls)):
                if calls[index].name == step.tool:
                    near = near or call_problem(step, calls[index])
                    if call_problem(step, calls[index]) is None:
                        found = index
                        break
            if found is None:
                return Outcome("fail", "trajectory:step", f"step {number}: {_step_miss(step, number, near, calls[:position])}")
            position = found + 1
        return PASS
    return _score_any_order(steps, calls)


def _step_miss(step: ExpectTool, number: int, near: tuple[str, str] | None, before: Sequence[ToolCall]) -> str:
    if near is not None:
        return near[1]
    if any(call.name == step.tool for call in before):
        return f"{step.tool} was called, but not after step {number - 1}"
    return f"{step.tool} was never called"


def _score_any_order(steps: Sequence[ExpectTool], calls: Sequence[ToolCall]) -> Outcome:
    """Each step needs a call of its own: a tool called once cannot satisfy two steps."""
    fits = [[index for index, call in enumerate(calls) if call.name == step.tool and call_problem(step, call) is None] for step in steps]
    owner: dict[int, int] = {}  # call index -> step index

    def assign(step: int, seen: set[int]) -> bool:
        for index in fits[step]:
            if index not in seen:
                seen.add(index)
                if index not in owner or assign(owner[index], seen):
                    owner[index] = step
                    return True
        return False

    for number, step in enumerate(steps):
        if not assign(number, set()):
            same_name = [call for call in calls if call.name == step.tool]
            near = next((p for p in (call_problem(step, call) for call in same_name) if p is not None), None)
            if near is not None and not fits[number]:
                detail = near[1]
            elif fits[number]:
                detail = f"{step.tool} was called {len(same_name)} time{'s' if len(same_name) > 1 else ''}, fewer than the steps that need it"
            else:
                detail = f"{step.tool} was never called"
            return Outcome("fail", "trajectory:step", f"step {number + 1}: {detail}")
    return PASS


def summarize(
    tallies: Sequence[Tally],
    gate: Decimal,
    *,
    runs: int = 1,
    gate_on: GateOn = "trials",
    not_run: int = 0,
) -> Summary:
    """Count trials overall and per category, compute pass^k and the flaky tasks, and decide the gate.

    The gate fails when the rate is below it, a blocking task did not pass, or the run was cut short.
    """
    statuses = [status for tally in tallies for status in tally.statuses]
    passed = statuses.count("pass")
    errored = statuses.count("error")
    counts = [(tally.statuses.count("pass"), len(tally.statuses)) for tally in tallies]  # (passing trials, trials) per task
    per_category: dict[str, list[int]] = {}
    for tally, (c, n) in zip(tallies, counts):
        total = per_category.setdefault(tally.category, [0, 0])
        total[0] += c
        total[1] += n
    pass_all_k = {k: pass_hat_k(counts, k) for k in range(1, runs + 1)}
    rate = Fraction(passed, len(statuses)) if statuses else Fraction(0)
    if gate_on == "pass-all":
        rate = pass_all_k.get(runs, Fraction(0))
    blocking_failed = tuple(t.task_id for t, (c, n) in zip(tallies, counts) if t.blocking and c < n)
    return Summary(
        passed=passed,
        failed=len(statuses) - passed - errored,
        errored=errored,
        total=len(statuses),
        gate=gate,
        gate_passed=bool(statuses) and not_run == 0 and not blocking_failed and rate * 100 >= Fraction(gate),
        by_category={name: CategoryCount(c, n) for name, (c, n) in per_category.items()},
        not_run=not_run,
        runs=runs,
        gate_on=gate_on,
        pass_all_k=pass_all_k,
        flaky=tuple(t.task_id for t, (c, n) in zip(tallies, counts) if 0 < c < n),
        blocking_failed=blocking_failed,
        violations=tuple(t.task_id for t in tallies if t.violation),
        tokens=total_tokens([t.tokens for t in tallies]),
        latency_ms=sum(t.latency_ms for t in tallies),
    )


def total_tokens(counts: Sequence[tuple[int, int] | None]) -> tuple[int, int] | None:
    reported = [count for count in counts if count is not None]
    return (sum(c[0] for c in reported), sum(c[1] for c in reported)) if reported else None


def pass_hat_k(counts: Sequence[tuple[int, int]], k: int) -> Fraction:
    """pass^k (tau-bench): the mean over tasks of C(c, k) / C(n, k), c passing trials of n; tasks with fewer than k trials are left out."""
    # Tasks with the same number of trials share a denominator: add their numerators first, exactly.
    numerators: dict[int, int] = {}
    for c, n in counts:
        if n >= k:
            numerators[n] = numerators.get(n, 0) + comb(c, k)
    tasks = sum(1 for _, n in counts if n >= k)
    return sum((Fraction(total, comb(n, k)) for n, total in numerators.items()), Fraction(0)) / tasks if tasks else Fraction(0)
