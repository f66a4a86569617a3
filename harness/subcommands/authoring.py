"""`eval_agent.py validate` and `eval_agent.py tools`: what is wrong or missing in a task file, before a run."""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from harness.config import DEFAULT_TASKS, Parser
from harness.subcommands.mcp_client import HttpSession, McpError, StdioSession, fetch_tools
from harness.records import ConfigError, ExpectRefusal, ExpectTool, ExpectTrajectory, Task, TaskFile
from harness.taskfile import read_task_file

MCP_TIMEOUT = 10.0


def add_mcp_flags(parser: Parser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--mcp-command", metavar="COMMAND", help="an MCP server to start, speaking stdio (split like a shell)")
    source.add_argument("--mcp-url", metavar="URL", help="an MCP server's Streamable HTTP endpoint")
    parser.add_argument("--mcp-timeout", metavar="SECONDS", type=float, default=MCP_TIMEOUT, help=f"the longest wait for one reply (default {MCP_TIMEOUT:g})")


def live_tools(args: Any) -> list[dict[str, Any]]:
    """The tools of the MCP server the flags name."""
    if args.mcp_command:
        try:
            argv = shlex.split(args.mcp_command)
        except ValueError as exc:
            raise ConfigError(f"--mcp-command: cannot split {args.mcp_command!r}: {exc}") from None
        if not argv:
            raise ConfigError("--mcp-command: empty command")
        return fetch_tools(StdioSession(argv, args.mcp_timeout))
    return fetch_tools(HttpSession(args.mcp_url, args.mcp_timeout))


def tools_main(argv: Sequence[str]) -> int:
    """Print a live MCP server's tools in the task file's `tools` format."""
    parser = Parser(prog="eval_agent.py tools", description="Print the tools of a live MCP server in the task file's `tools` format.")
    add_mcp_flags(parser)
    try:
        args = parser.parse_args(argv)
        if not (args.mcp_command or args.mcp_url):
            raise ConfigError("give --mcp-command or --mcp-url (see --help)")
        tools = live_tools(args)
    except ConfigError as exc:
        print(f"eval_agent tools: error: {exc}", file=sys.stderr)
        return 2
    except McpError as exc:
        print(f"eval_agent tools: error: {exc}", file=sys.stderr)
        return 3
    print(json.dumps(tools, indent=2, ensure_ascii=False))
    return 0


def validate_main(argv: Sequence[str]) -> int:
    """Every problem at once, the coverage table, and with an MCP server the drift from its live surface."""
    parser = Parser(
        prog="eval_agent.py validate",
        description="Check a task file: every problem at once, happy-path and negative coverage per tool, drift from a live MCP server.",
        epilog="Exit codes: 0 valid, 1 coverage gaps with --strict or drift from the live server, 2 an invalid task file, 3 the MCP server failed.",
    )
    parser.add_argument("--tasks", metavar="FILE", help="the task file (EVAL_TASKS, default eval-tasks.json beside eval_agent.py)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a tool lacks a happy-path or a negative task")
    add_mcp_flags(parser)
    try:
        args = parser.parse_args(argv)
        path = args.tasks or os.environ.get("EVAL_TASKS") or DEFAULT_TASKS
        task_file, problems = read_task_file(path, os.environ)
    except ConfigError as exc:
        print(f"eval_agent validate: error: {exc}", file=sys.stderr)
        return 2
    if task_file is None:
        for problem in problems:
            print(f"{path}: {problem}")
        print(f"{len(problems)} problem{'s' if len(problems) > 1 else ''}: not a valid task file")
        return 2
    print(f"{path}: valid, {len(task_file.tasks)} tasks, {len(task_file.tools)} tools")
    per_tool, per_category = coverage(task_file)
    for line in coverage_table(per_tool, per_category):
        print(line)
    gaps = [f"{name} has no {kind} task" for name, (happy, negative) in per_tool.items() for kind, ids in (("happy-path", happy), ("negative", negative)) if not ids]
    for gap in gaps:
        print(f"{'error' if args.strict else 'warning'}: {gap}")
    code = 1 if gaps and args.strict else 0
    if args.mcp_command or args.mcp_url:
        try:
            differences = drift(task_file, live_tools(args))
        except (ConfigError, McpError) as exc:
            print(f"eval_agent validate: error: {exc}", file=sys.stderr)
            return 2 if isinstance(exc, ConfigError) else 3
        print(f"live surface: {len(differences)} difference{'' if len(differences) == 1 else 's'} from the task file")
        for difference in differences:
            print(f"  {difference}")
        code = 1 if differences else code
    return code


def coverage(task_file: TaskFile) -> tuple[dict[str, tuple[list[str], list[str]]], dict[str, tuple[int, int]]]:
    """Per tool, the tasks that expect it (happy path) and those that forbid it (negative); per category, the count of each kind."""
    per_tool: dict[str, tuple[list[str], list[str]]] = {tool.name: ([], []) for tool in task_file.tools}
    per_category: dict[str, tuple[int, int]] = {}
    for task in task_file.tasks:
        for step in steps_of(task):
            per_tool[step.tool][0].append(task.id)
        for name in task.expect.forbidden_tools:
            per_tool[name][1].append(task.id)
        happy, negative = per_category.get(task.category, (0, 0))
        is_negative = isinstance(task.expect, ExpectRefusal) or bool(task.expect.forbidden_tools)
        per_category[task.category] = (happy + (not isinstance(task.expect, ExpectRefusal)), negative + is_negative)
    return per_tool, per_category


def coverage_table(per_tool: Mapping[str, tuple[list[str], list[str]]], per_category: Mapping[str, tuple[int, int]]) -> list[str]:
    width = max([len("tool"), *map(len, per_tool)])
    lines = [f"{'tool':<{width}}  happy  negative"]
    lines += [f"{name:<{width}}  {len(happy):>5}  {len(negative):>8}" for name, (happy, negative) in per_tool.items()]
    width = max([len("category"), *map(len, per_category)])
    lines.append(f"{'category':<{width}}  happy  negative")
    lines += [f"{name:<{width}}  {happy:>5}  {negative:>8}" for name, (happy, negative) in per_category.items()]
    return lines


def steps_of(task: Task) -> tuple[ExpectTool, ...]:
    """The tool expectations of a task: one for a tool task, each step of a trajectory, none for a refusal."""
    if isinstance(task.expect, ExpectTool):
        return (task.expect,)
    if isinstance(task.expect, ExpectTrajectory):
        return task.expect.steps
    return ()


def drift(task_file: TaskFile, live: Sequence[Mapping[str, Any]]) -> list[str]:
    """What in the task file no longer matches the live surface: missing tools, vanished properties, newly required args."""
    server = {tool["name"]: tool for tool in live}
    differences = [f"{tool.name}: not on the server" for tool in task_file.tools if tool.name not in server]
    declared = {tool.name: tool for tool in task_file.tools}
    for index, task in enumerate(task_file.tasks):
        for step in steps_of(task):
            if step.tool not in server:
                continue
            schema = server[step.tool].get("inputSchema") or {}
            properties, required = schema.get("properties") or {}, schema.get("required") or []
            supplied = [*step.required_args, *step.arg_values]
            for key in supplied:
                if key not in properties:
                    differences.append(f"tasks[{index}] ({task.id}): {step.tool} has no property {key} on the server any more")
            newly_required = [key for key in required if key not in declared[step.tool].input_schema.get("required", [])]
            for key in newly_required:
                if key not in supplied:
                    differences.append(f"tasks[{index}] ({task.id}): the server now requires {key} of {step.tool}, which the task does not supply")
    return differences
