"""The top level of a task file and each task in it: its keys, and the hash of what it asks and checks."""

from __future__ import annotations

import json
import re
import sys
from typing import Any

from harness.records import (
    DEFAULT_MAX_STEPS,
    Environment,
    Expect,
    ExpectState,
    FollowUp,
    Task,
    Tool,
    ToolScript,
    replace,
)
from harness.taskfile.context import NOTHING, Context
from harness.taskfile.expectations import expect, forbidden_text
from harness.taskfile.tools import check_tools
from harness.text import canonical_json, kind, sha256_hex

FORMAT_VERSION = 1
TOP_KEYS = ("version", "system", "tools", "toolResults", "checkArgs", "environment", "budget", "tasks")
TASK_KEYS = (
    "id",
    "category",
    "prompt",
    "turns",
    "tools",
    "toolResults",
    "maxSteps",
    "expect",
    "blocking",
    "environment",
    "quarantine",
    "comment",
)
TASK_KEY_SET = frozenset(TASK_KEYS)
MAX_STEPS = 100  # the most a task's maxSteps may be
SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
Shared = tuple[Any, Environment | None] | None  # the file's environment: as written, and as read


def canonical_sha256(value: Any) -> str:
    """SHA-256 of a JSON value in canonical form: the same definition hashes alike however it is laid out."""
    return sha256_hex(canonical_json(value).encode("utf-8"))


def check_task_file(context: Context, data: Any) -> tuple[tuple[Tool, ...], tuple[Task, ...]]:
    """The file's sound tools and tasks; every problem found is in the context."""
    if not isinstance(data, dict):
        context.problems.append(f"expected a JSON object at the top level, got {kind(data)}")
        return (), ()
    context.unknown_keys(data, TOP_KEYS, "")
    if "version" not in data:
        context.problem("version", f"missing (this harness reads task files of version {FORMAT_VERSION})")
    elif data["version"] != FORMAT_VERSION or isinstance(data["version"], bool):
        context.problem(
            "version", f"unsupported version {json.dumps(data['version'])} (this harness reads {FORMAT_VERSION})"
        )
    system = data.get("system")
    if system is not None and (not isinstance(system, str) or not system.strip()):
        context.problem("system", f"expected the agent's system prompt as a non-empty string, got {kind(system)}")
    tools = check_tools(context, data.get("tools"))
    defaults: dict[str, ToolScript] = {}
    if "toolResults" in data:
        from harness.taskfile.conversations import tool_results

        defaults = tool_results(context, data["toolResults"], "toolResults") or {}
    if "checkArgs" in data:
        from harness.taskfile.argchecks import check_args_mode

        context.check_args = check_args_mode(context, data["checkArgs"], "checkArgs") or "keys"
    shared = None
    if "environment" in data:
        from harness.taskfile.environments import environment

        shared = data["environment"], environment(context, data["environment"], "environment")
    budget = None
    if "budget" in data:
        from harness.taskfile.budgets import budget_keys

        budget = budget_keys(context, data["budget"], "budget")
    return tools, _tasks(context, data.get("tasks"), defaults, shared, budget)


def _tasks(
    context: Context, value: Any, defaults: dict[str, ToolScript], shared: Shared, budget: dict[str, Any] | None
) -> tuple[Task, ...]:
    if not isinstance(value, list):
        context.problem("tasks", f"expected a list of tasks, got {kind(value)}")
        return ()
    if not value:
        context.problem("tasks", "the task list is empty")
    tasks: list[Task] = []
    first_seen: dict[str, str] = {}
    for i, item in enumerate(value):
        path = f"tasks[{i}]"
        task = _task(context, item, path, defaults, shared, budget)
        value[i] = None  # read: let it go now, so that the file as parsed and its tasks are never in memory twice
        task_id = item.get("id") if isinstance(item, dict) else None
        if isinstance(task_id, str) and task_id in first_seen:
            context.problem(f"{path}.id", f"duplicate id {json.dumps(task_id)} (also {first_seen[task_id]})")
        elif isinstance(task_id, str):
            first_seen[task_id] = path
            if task is not None:
                tasks.append(task)
    return tuple(tasks)


def _task(
    context: Context,
    item: Any,
    path: str,
    defaults: dict[str, ToolScript],
    shared: Shared,
    shared_budget: dict[str, Any] | None,
) -> Task | None:
    if not isinstance(item, dict):
        context.problem(path, f"expected a task object, got {kind(item)}")
        return None
    if not item.keys() <= TASK_KEY_SET:
        context.unknown_keys(item, TASK_KEYS, path)
    task_id = context.text(item, "id", path)
    if task_id is not None and not SLUG.match(task_id):
        context.problem(f"{path}.id", f"{json.dumps(task_id)} is not a slug (letters, digits, '.', '_', '-')")
        task_id = None
    category = context.text(item, "category", path)
    prompt = context.text(item, "prompt", path)
    # Each key a task may have is checked where it is given: a plain task pays (and imports) for none of the others.
    follow_ups: tuple[FollowUp, ...] | None = ()
    if "turns" in item:
        from harness.taskfile.conversations import turns

        follow_ups = turns(context, item["turns"], f"{path}.turns", task_id or path)
    own: dict[str, ToolScript] | None = NOTHING
    if "toolResults" in item:
        from harness.taskfile.conversations import tool_results

        own = tool_results(context, item["toolResults"], f"{path}.toolResults")
    max_steps = item.get("maxSteps", DEFAULT_MAX_STEPS)
    if not isinstance(max_steps, int) or isinstance(max_steps, bool) or not 1 <= max_steps <= MAX_STEPS:
        context.problem(f"{path}.maxSteps", f"expected a whole number from 1 to {MAX_STEPS}, got {kind(max_steps)}")
    whole, where = item.get("expect"), f"{path}.expect"
    first = None
    if isinstance(whole, dict) and "firstTurn" in whole:
        from harness.taskfile.turnexpect import first_turn

        first = first_turn(context, whole, where, bool(item.get("turns")))
        whole = {key: value for key, value in whole.items() if key != "firstTurn"}
    expected = expect(context, whole, where, 1 + len(follow_ups or ()))
    forbidden = forbidden_text(context, whole, where, task_id or path)
    tools: tuple[tuple[str, ...], ...] | None = ()
    turn_expects: tuple[Expect | None, ...] = ()
    if follow_ups or "tools" in item:
        from harness.taskfile.turnexpect import check_offered, offered

        tools = offered(context, item, follow_ups or (), path)
        turn_expects = (first, *(follow_up.expect for follow_up in follow_ups or ()))
        if not any(turn_expects):
            turn_expects = ()
        if tools and expected is not None and follow_ups is not None:
            check_offered(context, expected, turn_expects, tools, path)
    blocking = item.get("blocking", False)
    if not isinstance(blocking, bool):
        context.problem(f"{path}.blocking", f"expected true or false, got {kind(blocking)}")
    world = None
    if "environment" in item:
        from harness.taskfile.environments import environment

        world = environment(context, item["environment"], f"{path}.environment")
    elif shared is not None:
        world = shared[1]
    broken = world is None and ("environment" in item or shared is not None)  # reported: no second problem
    state = None
    states: tuple[ExpectState | None, ...] = ()
    if not broken and isinstance(item.get("expect"), dict) and "state" in item["expect"]:
        from harness.taskfile.states import expect_state

        state = expect_state(context, item["expect"], where, world, expected)
    if not broken and "turns" in item:
        from harness.taskfile.turnexpect import turn_states

        states = turn_states(context, item, world, path)
    held, quarantined = None, "quarantine" in item
    if quarantined:
        from harness.taskfile.quarantine import quarantine

        held = quarantine(context, item["quarantine"], f"{path}.quarantine")
    budget = shared_budget
    if isinstance(whole, dict) and "budget" in whole:
        from harness.taskfile.budgets import budget_keys, effective_budget

        budget = effective_budget(shared_budget, budget_keys(context, whole["budget"], f"{path}.expect.budget"))
    if (
        task_id is None
        or category is None
        or prompt is None
        or expected is None
        or not isinstance(blocking, bool)
        or follow_ups is None
        or own is None
        or tools is None
        or (quarantined and held is None)
    ):
        return None
    scripts = {**defaults, **own} if defaults or own else NOTHING
    if world is None and not broken:
        for name, script in scripts.items():
            if script.fail_first and not (script.results or script.cases):  # then nothing answers: no environment
                where = f"{path}.toolResults" if name in own else "toolResults"
                context.problem(
                    f"{where}.{name}.failFirst",
                    f"{name} has nothing to answer after its failures: no sequence, cases or default, and "
                    f"{task_id or path} has no environment",
                )
    # A comment is for the author, and a quarantine for the gate: changing either changes nothing the agent sees or a
    # trial's verdict checks, so a baseline still compares the task (and a regression under quarantine still shows).
    definition = dict(item)
    definition.pop("comment", None)
    if quarantined:
        del definition["quarantine"]
    if defaults:  # the file's defaults are part of what the task plays back
        from harness.taskfile.conversations import script_definition

        definition["toolResults"] = {name: script_definition(script) for name, script in scripts.items()}
    if shared is not None and "environment" not in item:  # as is the file's environment
        definition["environment"] = shared[0]
    if context.check_args != "keys" and expected.steps and "checkArgs" not in item["expect"]:
        definition["expect"] = {**item["expect"], "checkArgs": context.check_args}  # the file's, as it judges the task
    limits = None
    if budget is not None:
        from harness.taskfile.budgets import make_budget

        limits = make_budget(budget)
        if shared_budget is not None:  # the file's, as what the task may spend; a task without one keeps its hash
            definition["expect"] = {**definition["expect"], "budget": budget}
    task = Task(
        id=task_id,
        category=sys.intern(category),
        prompt=prompt,
        expect=replace(expected, forbidden_text=forbidden) if forbidden else expected,
        sha256=canonical_sha256(definition),
        blocking=blocking,
        turns=tuple(follow_up.prompt for follow_up in follow_ups) if follow_ups else (),
        tool_results=scripts,
        max_steps=max_steps,
        turn_expects=turn_expects,
        offered=tools,
        environment=world,
        state=state,
        turn_states=states,
        budget=limits,
    )
    return task if held is None else replace(task, quarantine=held)  # the plain path passes no keyword for it
