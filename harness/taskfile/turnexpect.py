"""What a task says turn by turn: the first turn's expectation (expect.firstTurn), the state each turn must end in,
the tools the agent starts with (a task's "tools") and those each turn adds, and that every expected tool is one the
agent has at that turn."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from harness.records import Environment, Expect, ExpectState, ExpectTrajectory, FollowUp
from harness.taskfile.context import Context, is_list_of_str
from harness.taskfile.expectations import expect
from harness.taskfile.states import expect_state
from harness.text import kind


def first_turn(context: Context, value: Any, path: str, has_turns: bool) -> Expect | None:
    """The first turn's own expectation, expect.firstTurn, on a task with turns; None when it has none."""
    if not isinstance(value, dict) or "firstTurn" not in value:
        return None
    where = f"{path}.firstTurn"
    if not has_turns:
        context.problem(where, "the task has no turns; its expect is the first turn's")
        return None
    return None if state_only(value["firstTurn"]) else expect(context, value["firstTurn"], where, within_turn=True)


def state_only(value: Any) -> bool:
    """A turn's expect that checks the state the turn ends in and nothing of its calls: {"state": ...} alone."""
    return isinstance(value, dict) and list(value) == ["state"]


def turn_states(
    context: Context, item: dict[str, Any], environment: Environment | None, path: str
) -> tuple[ExpectState | None, ...]:
    """What the environment must hold when each user turn ends (expect.firstTurn's state, then each turn's); empty
    when no turn checks it."""
    whole, follow_ups = item.get("expect"), item.get("turns")
    if not isinstance(follow_ups, list) or not follow_ups:
        return ()
    first = whole.get("firstTurn") if isinstance(whole, dict) else None
    expects = [(first, f"{path}.expect.firstTurn")] + [
        (turn.get("expect") if isinstance(turn, dict) else None, f"{path}.turns[{j}].expect")
        for j, turn in enumerate(follow_ups)
    ]
    states = tuple(expect_state(context, value, where, environment, None, within_turn=True) for value, where in expects)
    return states if any(states) else ()


def offered(
    context: Context, item: dict[str, Any], follow_ups: Sequence[FollowUp], path: str
) -> tuple[tuple[str, ...], ...] | None:
    """The names of the tools the agent has in each user turn: the task's "tools" (else the file's), then each
    turn's addTools; empty when the task has neither key, None and a problem when one is wrong."""
    if "tools" not in item and not any(follow_up.add_tools for follow_up in follow_ups):
        return ()
    problems = len(context.problems)
    names = item.get("tools", list(context.tools))
    if not is_list_of_str(names):
        context.problem(f"{path}.tools", f"expected a list of names from the file's tools, got {kind(names)}")
        return None
    for i, name in enumerate(names):
        if names.index(name) != i:
            context.problem(f"{path}.tools[{i}]", f"{json.dumps(name)} is listed twice")
        else:
            context.unlisted(name, f"{path}.tools[{i}]")
    given = list(names)
    turns = [tuple(given)]
    for j, follow_up in enumerate(follow_ups):
        for i, name in enumerate(follow_up.add_tools):
            if name in given:
                every = "" if "tools" in item else ' (the task has no "tools": it offers every tool)'
                context.problem(f"{path}.turns[{j}].addTools[{i}]", f"{json.dumps(name)} is offered already{every}")
            given.append(name)
        turns.append(tuple(given))
    return tuple(turns) if len(context.problems) == problems else None


def check_offered(
    context: Context,
    task_expect: Expect,
    turn_expects: Sequence[Expect | None],
    offered: Sequence[tuple[str, ...]],
    path: str,
) -> None:
    """A problem for each expected tool the agent does not have at the turn it is expected in."""
    every = tuple(sorted({name for names in offered for name in names}))
    for number, (expected, names) in enumerate(zip(turn_expects, offered, strict=False), 1):
        where = f"{path}.expect.firstTurn" if number == 1 else f"{path}.turns[{number - 2}].expect"
        for step_path, step in _steps(expected, where):
            if step.tool not in names:
                context.problem(
                    step_path, f"{json.dumps(step.tool)} is not offered in turn {number} (offered: {_listed(names)})"
                )
    for step_path, step in _steps(task_expect, f"{path}.expect"):
        names = offered[step.turn - 1] if step.turn is not None else every
        if step.tool not in names:
            said = f"is not offered in turn {step.turn}" if step.turn is not None else "is offered in no turn"
            context.problem(step_path, f"{json.dumps(step.tool)} {said} (offered: {_listed(names)})")


def _steps(expected: Expect | None, path: str) -> list[tuple[str, Any]]:
    """Each expected call with the JSON path of its tool's name."""
    if expected is None:
        return []
    if isinstance(expected, ExpectTrajectory):
        return [(f"{path}.trajectory[{i}].tool", step) for i, step in enumerate(expected.steps)]
    return [(f"{path}.tool", step) for step in expected.steps]


def _listed(names: Sequence[str]) -> str:
    return ", ".join(names) or "none"
