"""What a task expects: a tool call, a trajectory of calls, a refusal or an answer without a call, and the tools and
text it forbids."""

from __future__ import annotations

import json
import sys
from typing import Any, TypeVar

from harness.records import (
    ArgMatch,
    Expect,
    ExpectNoCall,
    ExpectRefusal,
    ExpectTool,
    ExpectTrajectory,
    ForbiddenText,
    replace,
)
from harness.taskfile.context import NOTHING, Context, hint, is_list_of_str
from harness.text import kind

EXPECT_TOOL_KEYS = (
    "tool",
    "requiredArgs",
    "argValues",
    "forbiddenTools",
    "forbiddenText",
    "checkArgs",
    "state",
    "budget",
)
EXPECT_TOOL_KEY_SET = frozenset(EXPECT_TOOL_KEYS)
EXPECT_TRAJECTORY_KEYS = ("trajectory", "order", "forbiddenTools", "forbiddenText", "checkArgs", "state", "budget")
EXPECT_REFUSAL_KEYS = ("refusal", "forbiddenTools", "forbiddenText", "state", "budget")
EXPECT_NO_CALL_KEYS = ("noCall", "forbiddenText", "state")  # a turn's
EXPECT_ANSWER_KEYS = ("noCall", "forbiddenTools", "forbiddenText", "state", "budget")  # a single-turn task's
STEP_KEYS = ("tool", "requiredArgs", "argValues", "turn")
ORDERS = ("in-order", "exact", "any-order")
E = TypeVar("E", ExpectTool, ExpectTrajectory)


def expect(context: Context, value: Any, path: str, turns: int = 1, within_turn: bool = False) -> Expect | None:
    """A task's expectation, or a turn's (judged on that turn's calls alone, which may be noCall), or None and the
    problems; its forbiddenText is read apart (forbidden_text)."""
    if value is None:
        context.problem(path, f"missing: expected {_shapes(within_turn)}")
        return None
    if not isinstance(value, dict):
        context.problem(path, f"expected {_shapes(within_turn)}, got {kind(value)}")
        return None
    if not within_turn and "noCall" in value and turns > 1:
        context.problem(
            f"{path}.noCall",
            "a task with turns expects noCall of a turn (in turns[N].expect or expect.firstTurn)",
        )
        return None
    if within_turn and "budget" in value:
        context.problem(f"{path}.budget", "a budget is the whole trial's: the task's expect (or the file's) has it")
        return None
    kinds = [key for key in ("tool", "trajectory", "refusal", "noCall") if key in value]
    if len(kinds) > 1:
        whose = "a turn" if within_turn else "a task"
        context.problem(path, f"has {' and '.join(json.dumps(k) for k in kinds)}; {whose} expects one of them")
        return None
    if "noCall" in value:
        context.unknown_keys(value, EXPECT_NO_CALL_KEYS if within_turn else EXPECT_ANSWER_KEYS, path)
        forbidden = () if within_turn else _forbidden_tools(context, value, path, expected=())
        if value["noCall"] is not True:
            context.problem(f"{path}.noCall", f"expected true, got {json.dumps(value['noCall'])}")
            return None
        return None if forbidden is None else ExpectNoCall(forbidden_tools=forbidden, whole_task=not within_turn)
    if "refusal" in value:
        context.unknown_keys(value, EXPECT_REFUSAL_KEYS, path)
        forbidden = _forbidden_tools(context, value, path, expected=())
        if value["refusal"] is not True:
            context.problem(f"{path}.refusal", f"expected true, got {json.dumps(value['refusal'])}")
            return None
        return None if forbidden is None else ExpectRefusal(forbidden_tools=forbidden)
    if "trajectory" in value:
        trajectory = _trajectory(context, value, path, turns, within_turn)
        return trajectory and _with_schemas(context, trajectory, value, path)
    if "tool" not in value:
        context.unknown_keys(value, EXPECT_TOOL_KEYS + EXPECT_TRAJECTORY_KEYS + EXPECT_REFUSAL_KEYS, path)
        context.problem(path, f"expected {_shapes(within_turn)}")
        return None
    if not value.keys() <= EXPECT_TOOL_KEY_SET:
        context.unknown_keys(value, EXPECT_TOOL_KEYS, path)
    step = _step(context, value, path)
    forbidden = _forbidden_tools(context, value, path, expected=(value.get("tool"),))
    if step is None or forbidden is None:
        return None
    if forbidden:
        step = ExpectTool(step.tool, step.required_args, forbidden, step.arg_values)
    return _with_schemas(context, step, value, path)


def _shapes(within_turn: bool) -> str:
    """The shapes an expectation may have, as a problem with one lists them."""
    shapes = '{"tool": NAME, "requiredArgs": [KEY, ...]}, {"trajectory": [NAME, ...]}, {"refusal": true}'
    return shapes + (
        ', {"noCall": true} or {"state": {"match": {...}}} alone' if within_turn else ' or {"noCall": true}'
    )


def _with_schemas(context: Context, expect: E, value: dict[str, Any], path: str) -> E | None:
    """The expectation, each step with its tool's schema when checkArgs (the task's, or the file's) says "schema"."""
    if "checkArgs" not in value and context.check_args == "keys":
        return expect
    from harness.taskfile.argchecks import with_schemas  # only a task file that says checkArgs needs it

    return with_schemas(context, expect, value, path)


def _trajectory(
    context: Context, value: dict[str, Any], path: str, turns: int, within_turn: bool
) -> ExpectTrajectory | None:
    context.unknown_keys(value, EXPECT_TRAJECTORY_KEYS, path)
    items = value["trajectory"]
    if not isinstance(items, list) or not items:
        context.problem(f"{path}.trajectory", "expected a non-empty list of tool names or steps")
        return None
    order = value.get("order", "in-order")
    if order not in ORDERS:
        context.problem(f"{path}.order", f"expected one of {', '.join(ORDERS)}, got {kind(order)}")
    steps = []
    for j, item in enumerate(items):
        where = f"{path}.trajectory[{j}]"
        if isinstance(item, str):
            item = {"tool": item}
        elif isinstance(item, dict):
            context.unknown_keys(item, STEP_KEYS, where)
        else:
            context.problem(where, f"expected a tool name or a step object, got {kind(item)}")
            continue
        step = _step(context, item, where)
        turn = item.get("turn")
        if turn is not None and within_turn:
            context.problem(
                f"{where}.turn", "a turn's expectation judges that turn's calls; \"turn\" is for the task's trajectory"
            )
            step = None
        elif turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or not 1 <= turn <= turns):
            last = "1 (the task has no turns)" if turns == 1 else f"from 1 to {turns} (the prompt and its turns)"
            context.problem(f"{where}.turn", f"expected the user turn the call answers, {last}, got {kind(turn)}")
            step = None
        steps.append(step if step is None or turn is None else replace(step, turn=turn))
    names = tuple(
        item if isinstance(item, str) else item.get("tool") if isinstance(item, dict) else None for item in items
    )
    forbidden = _forbidden_tools(context, value, path, expected=names)
    if forbidden is None or order not in ORDERS or any(step is None for step in steps) or len(steps) != len(items):
        return None
    return ExpectTrajectory(tuple(steps), order, forbidden)  # type: ignore[arg-type]


def _step(context: Context, value: dict[str, Any], path: str) -> ExpectTool | None:
    """A tool with its required args and argument values: a tool task's expectation, or one step of a trajectory."""
    name = context.text(value, "tool", path)
    tool = context.tools.get(name) if name is not None else None
    if name is not None and tool is None:
        context.unlisted(name, f"{path}.tool")
    properties = tool.input_schema.get("properties", {}) if tool else {}
    required = value.get("requiredArgs", [])
    if not is_list_of_str(required):
        context.problem(f"{path}.requiredArgs", "expected a list of strings")
        return None
    for j, key in enumerate(required):
        if required.index(key) != j:
            context.problem(f"{path}.requiredArgs[{j}]", f"{json.dumps(key)} is listed twice")
        elif tool is not None and key not in properties:
            context.problem(
                f"{path}.requiredArgs[{j}]",
                f"{json.dumps(key)} is not a property of {tool.name}'s inputSchema{hint(key, properties)}",
            )
    values: dict[str, ArgMatch] | None = NOTHING
    if "argValues" in value:
        from harness.taskfile.argchecks import arg_values  # only a task that says values needs it

        values = arg_values(context, value["argValues"], f"{path}.argValues", tool, properties, required)
    if tool is None or values is None:
        return None
    # Names repeat from task to task: one copy of each serves them all.
    return ExpectTool(tool=tool.name, required_args=tuple(map(sys.intern, required)), arg_values=values)


def _forbidden_tools(
    context: Context, expect: dict[str, Any], path: str, expected: tuple[Any, ...]
) -> tuple[str, ...] | None:
    if "forbiddenTools" not in expect:
        return ()
    names = expect["forbiddenTools"]
    where = f"{path}.forbiddenTools"
    if not is_list_of_str(names):
        context.problem(where, "expected a list of tool names")
        return None
    problems = len(context.problems)
    for j, name in enumerate(names):
        if names.index(name) != j:
            context.problem(f"{where}[{j}]", f"{json.dumps(name)} is listed twice")
        elif name in expected:
            context.problem(
                f"{where}[{j}]", f"{json.dumps(name)} is an expected tool; a task cannot expect and forbid it"
            )
        else:
            context.unlisted(name, f"{where}[{j}]")
    return tuple(names) if len(context.problems) == problems else None


def forbidden_text(context: Context, expect: Any, path: str, task_id: str) -> tuple[ForbiddenText, ...]:
    """Text the reply must not contain, expanded here: an unset variable skips its entry, with a warning."""
    if not isinstance(expect, dict) or "forbiddenText" not in expect:
        return ()
    entries = expect["forbiddenText"]
    where = f"{path}.forbiddenText"
    if not isinstance(entries, list):
        context.problem(where, "expected a list of non-empty strings")
        return ()
    found = []
    for j, entry in enumerate(entries):
        if not isinstance(entry, str) or not entry.strip():
            context.problem(f"{where}[{j}]", f"expected a non-empty string, got {kind(entry)}")
            continue
        value, unset = context.substitute(entry, f"{where}[{j}]")
        for name in unset:
            context.skipped.setdefault(name, []).append(task_id)
        if not unset:
            found.append(ForbiddenText(entry, value))
    return tuple(found)
