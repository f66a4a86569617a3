"""`expect.state`: what a task's environment must end in, a JSON subset (`{"match": {...}}`) or the state its
expected calls make on a fresh instance (`"reference"`)."""

from __future__ import annotations

from typing import Any

from harness.records import Environment, Expect, ExpectState, ExpectTrajectory, ToolCall
from harness.taskfile.context import Context
from harness.text import kind

SHAPES = '{"match": {...}} or "reference"'


def expect_state(
    context: Context, value: Any, path: str, environment: Environment | None, expected: Expect | None
) -> ExpectState | None:
    """The state check at path (an expect's `state`), or None and the problems; None too when there is none."""
    if not isinstance(value, dict) or "state" not in value:
        return None
    state, where = value["state"], f"{path}.state"
    if environment is None:
        context.problem(where, "a state check needs an environment (the task's or the file's)")
        return None
    if isinstance(state, dict) and list(state) == ["match"]:
        if not isinstance(state["match"], dict):
            context.problem(
                f"{where}.match", f"expected an object the final state must contain, got {kind(state['match'])}"
            )
            return None
        return ExpectState(match=state["match"], where=where)
    if state != "reference":
        context.problem(where, f"expected {SHAPES}, got {kind(state)}")
        return None
    if expected is None:
        return None
    if not expected.steps:
        context.problem(where, "a reference state is made by the expected calls: the task expects none")
        return None
    calls = []
    for j, step in enumerate(expected.steps):
        step_path = f"{path}.trajectory[{j}]" if isinstance(expected, ExpectTrajectory) else path
        unvalued = [key for key in step.required_args if key not in step.arg_values]
        if unvalued:
            context.problem(
                f"{step_path}.requiredArgs",
                f"{', '.join(unvalued)} without a value in argValues: the reference state needs the call's values",
            )
        calls.append(ToolCall(step.tool, {key: match.values[0] for key, match in step.arg_values.items()}))
    return ExpectState(reference=tuple(calls), where=where)
