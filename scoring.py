"""Pure scoring: one reply against one task, and a run's outcomes against the gate."""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal

from records import CategoryCount, ExpectRefusal, ExpectTool, Outcome, Reply, Result, Summary, Task, ToolCall

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


def summarize(results: Sequence[Result], gate: Decimal, not_run: int = 0) -> Summary:
    """Count outcomes overall and per category, and decide the gate; a run cut short never meets it."""
    passed = sum(result.outcome.status == "pass" for result in results)
    errored = sum(result.outcome.status == "error" for result in results)
    total = len(results)
    categories: dict[str, CategoryCount] = {}
    for result in results:
        count = categories.get(result.task.category, CategoryCount(0, 0))
        categories[result.task.category] = CategoryCount(
            count.passed + (result.outcome.status == "pass"), count.total + 1
        )
    return Summary(
        passed=passed,
        failed=total - passed - errored,
        errored=errored,
        total=total,
        gate=gate,
        gate_passed=total > 0 and not_run == 0 and passed * 100 >= gate * total,
        by_category=categories,
        not_run=not_run,
    )
