"""How an expected call's arguments are checked: the values a task accepts (argValues), and checkArgs "schema", which
checks every call against the tool's inputSchema too."""

from __future__ import annotations

import json
from typing import Any, TypeVar

from harness.records import ArgMatch, ExpectTool, ExpectTrajectory, InputSchema, Tool, replace
from harness.schema import check_value, compile_schema
from harness.taskfile.context import NOTHING, Context, hint
from harness.text import clip, kind

ARG_MATCH_KEYS = ("anyOf", "ignoreCase", "ignorePunctuation", "optional")
# How calls to an expected tool are checked: the keys and values the task names, or against the tool's inputSchema too.
CHECK_ARGS = ("keys", "schema")
E = TypeVar("E", ExpectTool, ExpectTrajectory)


def arg_values(
    context: Context, value: Any, path: str, tool: Tool | None, properties: dict[str, Any], required: list[str]
) -> dict[str, ArgMatch] | None:
    """The accepted values of an expected call's arguments by name, or None and the problems."""
    if not isinstance(value, dict):
        context.problem(path, 'expected an object of argument names to accepted values: {"format": ["webp"]}')
        return None
    matches: dict[str, ArgMatch] = {}
    problems = len(context.problems)
    for key, accepted in value.items():
        where = f"{path}.{key}"
        if tool is not None and key not in properties:
            context.problem(
                where, f"{json.dumps(key)} is not a property of {tool.name}'s inputSchema{hint(key, properties)}"
            )
            continue
        options = {"ignoreCase": False, "ignorePunctuation": False, "optional": False}
        if isinstance(accepted, dict):
            context.unknown_keys(accepted, ARG_MATCH_KEYS, where)
            for option in options:
                options[option] = accepted.get(option, False)
                if not isinstance(options[option], bool):
                    context.problem(f"{where}.{option}", f"expected true or false, got {kind(options[option])}")
            accepted = accepted.get("anyOf")
        if not isinstance(accepted, list) or not accepted:
            context.problem(
                where, 'expected a non-empty list of accepted values, or {"anyOf": [...], "ignoreCase": true}'
            )
            continue
        if options["optional"] is True and key in required:
            context.problem(f"{where}.optional", f"{json.dumps(key)} is in requiredArgs too, which makes it required")
        matches[key] = ArgMatch(
            tuple(accepted),
            ignore_case=options["ignoreCase"] is True,
            ignore_punctuation=options["ignorePunctuation"] is True,
            optional=options["optional"] is True,
        )
    return (matches or NOTHING) if len(context.problems) == problems else None


def check_args_mode(context: Context, value: Any, path: str) -> str | None:
    """The checkArgs setting at path ("keys" or "schema"), or None and a problem."""
    if value not in CHECK_ARGS:
        context.problem(
            path,
            f'expected "schema" (check every call against the tool\'s inputSchema) or "keys", got {kind(value)}',
        )
        return None
    return str(value)


def with_schemas(context: Context, expect: E, value: dict[str, Any], path: str) -> E | None:
    """The expectation, each step with its tool's schema when checkArgs (the task's, or the file's) is "schema"."""
    mode = (
        check_args_mode(context, value["checkArgs"], f"{path}.checkArgs")
        if "checkArgs" in value
        else context.check_args
    )
    if mode != "schema":
        return expect if mode else None
    steps = []
    for j, step in enumerate(expect.steps):
        schema = _schema(context, context.tools[step.tool])
        if schema is None:
            return None
        where = f"{path}.trajectory[{j}]" if isinstance(expect, ExpectTrajectory) else path
        _accepted_values(context, step, schema, where)
        steps.append(replace(step, schema=schema))
    if isinstance(expect, ExpectTrajectory):
        return replace(expect, steps=tuple(steps))
    return steps[0]


def _schema(context: Context, tool: Tool) -> InputSchema | None:
    """The tool's inputSchema ready to check calls; its problems are said once, at the tool's own path."""
    if tool.name not in context.schemas:
        schema, problems = compile_schema(tool.name, tool.input_schema)
        for where, message in problems:
            context.problem(f"{context.tool_paths[tool.name]}.inputSchema.{where}".rstrip("."), message)
        context.schemas[tool.name] = schema
    return context.schemas[tool.name]


def _accepted_values(context: Context, step: ExpectTool, schema: InputSchema, path: str) -> None:
    """An accepted value the tool's schema rejects can never pass: say so now, not after a run of failures."""
    for key, match in step.arg_values.items():
        if match.ignore_case or match.ignore_punctuation:
            continue  # a loosely matched value need not be written as the tool takes it
        for accepted in match.values:
            problem = check_value(schema, key, accepted)
            if problem is not None:
                context.problem(
                    f"{path}.argValues.{key}",
                    f"the accepted value {clip(json.dumps(accepted, ensure_ascii=False), 60)} can never pass "
                    f'with checkArgs "schema": {problem}',
                )
