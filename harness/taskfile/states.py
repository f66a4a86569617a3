"""`expect.state`: what a task's environment must end in, a JSON subset (`{"match": {...}}`) or the state its
expected calls make on a fresh instance (`"reference"`); and what it must be in when a turn ends (a match)."""

from __future__ import annotations

from typing import Any

from harness.records import Environment, Expect, ExpectState, ExpectTrajectory, ToolCall
from harness.taskfile.context import Context
from harness.text import kind

SHAPES = '{"match": {...}} or "reference"'
TURN_SHAPE = '{"match": {...}}'


def expect_state(
    context: Context,
    value: Any,
    path: str,
    environment: Environment | None,
    expected: Expect | None,
    within_turn: bool = False,
) -> ExpectState | None:
    """The state check at path (an expect's `state`, or a turn's: a match only), or None and the problems; None too
    when there is none."""
    if not isinstance(value, dict) or "state" not in value:
        return None
    state, where = value["state"], f"{path}.state"
    if environment is None:
        context.problem(where, "a state check needs an environment (the task's or the file's)")
        return None
    if isinstance(state, dict) and list(state) == ["match"]:
        if not isinstance(state["match"], dict):
            whose = "state at the turn's end" if within_turn else "final state"
            context.problem(
                f"{where}.match", f"expected an object the {whose} must contain, got {kind(state['match'])}"
            )
            return None
        for empty in _empty_objects(state["match"], f"{where}.match"):
            context.warn(
                empty,
                "{} checks nothing: every state holds it"
                if empty == f"{where}.match"
                else "{} checks only that the state has an object there, whatever it holds",
            )
        return ExpectState(match=state["match"], where=where)
    if state != "reference":
        context.problem(where, f"expected {TURN_SHAPE if within_turn else SHAPES}, got {kind(state)}")
        return None
    if within_turn:
        # A turn's reference would be the state of the expected calls up to that turn: the task's expect does not
        # say which of its calls each turn makes, and a turn's own calls alone start from no known state.
        context.problem(
            where,
            f"a turn's state is checked with {TURN_SHAPE}; \"reference\" is the task's (expect.state), the state its "
            "expected calls make over the whole conversation",
        )
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


def _empty_objects(match: dict[str, Any], path: str) -> list[str]:
    """The paths of the empty objects a match holds by key (an array's items are matched exactly: `{}` only by `{}`)."""
    if not match:
        return [path]
    return [
        empty
        for key, value in match.items()
        if isinstance(value, dict)
        for empty in _empty_objects(value, f"{path}.{key}")
    ]
