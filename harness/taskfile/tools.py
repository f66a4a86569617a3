"""A task file's tools: the surface the agent is given, each tool with its name, description and inputSchema."""

from __future__ import annotations

import json
from typing import Any

from harness.records import Tool
from harness.taskfile.context import Context, hint, is_list_of_str
from harness.text import kind, provider_name


def check_tools(context: Context, value: Any) -> tuple[Tool, ...]:
    """The sound tools, in order; what later checks need to know of the others is kept in the context."""
    if not isinstance(value, list):
        context.problem("tools", f"expected a list of tool objects, got {kind(value)}")
        context.tools_unreadable = True
        return ()
    tools: list[Tool] = []
    first_seen: dict[str, str] = {}
    safe_names: dict[str, tuple[str, str]] = {}  # a tool's name as providers take it -> the tool's name and path
    for i, item in enumerate(value):
        path = f"tools[{i}]"
        tool = _tool(context, item, path)
        if tool is None:
            if isinstance(item, dict) and isinstance(item.get("name"), str):
                context.broken_tools.add(item["name"])
            continue
        if tool.name in first_seen:
            context.problem(
                f"{path}.name", f"duplicate tool name {json.dumps(tool.name)} (also {first_seen[tool.name]})"
            )
            continue
        first_seen[tool.name] = path
        safe = provider_name(tool.name)
        if safe in safe_names:
            # Agents on a provider's API report the safe name: it must read back as one tool, as must a provider's.
            other, where = safe_names[safe]
            context.problem(
                f"{path}.name",
                f"{json.dumps(tool.name)} and {json.dumps(other)} ({where}) are both {json.dumps(safe)} as providers"
                " take tool names (a-z, A-Z, 0-9, _ and -, at most 64) and agents on their APIs report them;"
                " rename one",
            )
            context.broken_tools.add(tool.name)
            continue
        safe_names[safe] = tool.name, path
        context.tool_paths[tool.name] = path
        tools.append(tool)
    context.tools = {tool.name: tool for tool in tools}
    return tuple(tools)


def _tool(context: Context, item: Any, path: str) -> Tool | None:
    # Tool entries keep MCP's extra keys (title, annotations, outputSchema...) so they paste as they are.
    if not isinstance(item, dict):
        context.problem(path, f"expected a tool object, got {kind(item)}")
        return None
    name = context.text(item, "name", path)
    description = item.get("description", "")
    if not isinstance(description, str):
        context.problem(f"{path}.description", f"expected a string, got {kind(description)}")
    schema = item.get("inputSchema")
    if schema is None:
        context.problem(f"{path}.inputSchema", "missing (a JSON Schema object, as in MCP's tools/list)")
    elif _input_schema(context, schema, f"{path}.inputSchema") and name is not None and isinstance(description, str):
        return Tool(name=name, description=description, input_schema=schema)
    return None


def _input_schema(context: Context, schema: Any, path: str) -> bool:
    """Whether the inputSchema is an object schema whose required keys are among its properties."""
    problems = len(context.problems)
    if not isinstance(schema, dict):
        context.problem(path, f"expected a JSON Schema object, got {kind(schema)}")
        return False
    if schema.get("type", "object") != "object":
        context.problem(f"{path}.type", f'expected "object", got {json.dumps(schema["type"])}')
    properties = schema.get("properties", {})
    if not isinstance(properties, dict):
        context.problem(f"{path}.properties", f"expected an object, got {kind(properties)}")
        properties = {}
    required = schema.get("required", [])
    if not is_list_of_str(required):
        context.problem(f"{path}.required", "expected a list of strings")
    else:
        for j, key in enumerate(required):
            if key not in properties:
                context.problem(
                    f"{path}.required[{j}]", f"{json.dumps(key)} is not in properties{hint(key, properties)}"
                )
    return len(context.problems) == problems
