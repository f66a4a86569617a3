"""A conversation in a task file: the user's follow-up turns, and the results scripted for the agent's tool calls."""

from __future__ import annotations

import json
from typing import Any

from harness.records import Tool, ToolScript
from harness.taskfile.context import Context, hint
from harness.text import kind


def turns(context: Context, value: Any, path: str) -> tuple[str, ...] | None:
    """The user's follow-up messages: a list of non-empty strings."""
    if not isinstance(value, list):
        context.problem(path, f"expected a list of the user's follow-up messages, got {kind(value)}")
        return None
    problems = len(context.problems)
    for j, item in enumerate(value):
        if not isinstance(item, str) or not item.strip():
            context.problem(f"{path}[{j}]", f"expected a non-empty string, got {kind(item)}")
    return tuple(value) if len(context.problems) == problems else None


def tool_results(context: Context, value: Any, path: str) -> dict[str, ToolScript] | None:
    """Scripted tool results by tool name: a result for every call, or {"sequence": [...]} call by call."""
    if not isinstance(value, dict):
        context.problem(path, f"expected an object of tool names to results, got {kind(value)}")
        return None
    problems = len(context.problems)
    scripts: dict[str, ToolScript] = {}
    for name, script in value.items():
        where = f"{path}.{name}"
        tool = context.tools.get(name)
        if tool is None:
            context.unlisted(name, where)
            continue
        sequence = isinstance(script, dict) and list(script) == ["sequence"]
        results = script["sequence"] if sequence else [script]
        if not isinstance(results, list) or not results:
            context.problem(f"{where}.sequence", "expected a non-empty list of results, one per call")
            continue
        for j, result in enumerate(results):
            _echoes(context, result, f"{where}.sequence[{j}]" if sequence else where, tool)
        scripts[name] = ToolScript(tuple(results))
    return scripts if len(context.problems) == problems else None


def _echoes(context: Context, value: Any, path: str, tool: Tool) -> None:
    """Every {"echo": KEY} in a result names a property of the tool's inputSchema."""
    if isinstance(value, list):
        for i, item in enumerate(value):
            _echoes(context, item, f"{path}[{i}]", tool)
    elif isinstance(value, dict):
        if list(value) == ["echo"]:
            key, properties = value["echo"], tool.input_schema.get("properties", {})
            if not isinstance(key, str) or key not in properties:
                got = json.dumps(key) if isinstance(key, str) else kind(key)
                context.problem(
                    f"{path}.echo",
                    f"expected an argument of {tool.name} (a property of its inputSchema), got {got}"
                    + (hint(key, properties) if isinstance(key, str) else ""),
                )
            return
        for key, item in value.items():
            _echoes(context, item, f"{path}.{key}", tool)
