"""`eval_agent.py validate`: what is wrong or missing in a task file, before a run; with an MCP server, what drifted."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness.config import MAX_TASK_FILE_BYTES, TASKS
from harness.conversation import UNSCRIPTED, ToolPlayer
from harness.endpoints import environment_secrets, variable_secrets
from harness.flags import Parser
from harness.leaks import Secrets
from harness.records import NO_BUDGET, ExpectRefusal, ExpectTool, Reply, Step, Task, TaskFile, Tool, ToolCall
from harness.reporters.console import say
from harness.schema import compile_schema
from harness.scoring import repeated_steps
from harness.settings import Setting, Sources, refuse_unknown
from harness.subcommands.mcp_client import fetch_tools
from harness.subcommands.tools import add_mcp_flags, mcp_session
from harness.taskfile import read_task_file
from harness.taskfile.quarantine import quarantine_warnings
from harness.text import count, utc_today


def main(
    argv: Sequence[str],
    settings: Sequence[Setting],
    schema_notes: Mapping[str, Callable[[Sequence[Tool]], list[str]]],
) -> int:
    """Every problem at once, the coverage table, and with an MCP server the drift from its live surface.

    settings: every setting declared; any other EVAL_ variable is refused unless a placeholder names it, and the
    secret ones are kept out of a tool environment's worker.
    schema_notes: by backend, what it does not send of the tools' schemas; listed for the one EVAL_BACKEND names.
    """
    parser = Parser(
        prog="eval_agent.py validate",
        description="Check a task file: every problem at once, happy-path and negative coverage per tool, "
        "drift from a live MCP server.",
        epilog="Exit codes: 0 valid, 1 coverage gaps with --strict or drift from the live server, "
        "2 an invalid task file, 3 the MCP server failed.",
    )
    parser.add_argument("--tasks", metavar="FILE", help=f"the task file ({TASKS.var}, default {TASKS.shown})")
    parser.add_argument(
        "--strict", action="store_true", help="exit 1 when a tool lacks a happy-path or a negative task"
    )
    add_mcp_flags(parser)
    args = parser.parse_args(argv)
    session = mcp_session(args)
    sources = Sources(args, os.environ)
    path = sources.get(TASKS)
    task_file, problems = read_task_file(path, os.environ, sources.get(MAX_TASK_FILE_BYTES))
    if task_file is None:
        for problem in problems:
            say(f"{path}: {problem}")
        say(f"{count(len(problems), 'problem')}: not a valid task file")
        return 2
    refuse_unknown(os.environ, {setting.var for setting in settings}, task_file.variables)
    answered: dict[str, frozenset[str]] = {}
    if any(task.environment for task in task_file.tasks):  # started in workers, as a run starts them
        from harness.environments import check_environments

        answered = check_environments(path, task_file.tasks, Secrets(environment_secrets(settings, os.environ)))
    say(f"{path}: valid, {count(len(task_file.tasks), 'task')}, {count(len(task_file.tools), 'tool')}")
    warnings = (
        *task_file.warnings,
        *unscripted(task_file, answered),
        *answer_tasks(task_file),
        *self_loops(task_file),
        *quarantine_warnings(task_file.tasks, utc_today()),
    )
    # A task's id may hold what its placeholders expanded: said masked, as a run says it.
    known = Secrets(
        environment_secrets(settings, os.environ) | variable_secrets(task_file.expanded, settings, os.environ)
    )
    for warning in warnings:
        say(known.mask(f"warning: {warning}"))
    backend = os.environ.get("EVAL_BACKEND", "")
    for note in schema_notes[backend](task_file.tools) if backend in schema_notes else []:
        say(f"{backend}: {note}")
    per_tool, per_category = coverage(task_file)
    for line in coverage_table(per_tool, per_category):
        say(line)
    gaps = [
        f"{name} has no {kind} task"
        for name, (happy, negative) in per_tool.items()
        for kind, ids in (("happy-path", happy), ("negative", negative))
        if not ids
    ]
    for gap in gaps:
        say(f"{'error' if args.strict else 'warning'}: {gap}")
    code = 1 if gaps and args.strict else 0
    if session is not None:
        differences = drift(task_file, fetch_tools(session()))
        say(f"live surface: {count(len(differences), 'difference')} from the task file")
        for difference in differences:
            say(f"  {difference}")
        code = 1 if differences else code
    return code


def unscripted(task_file: TaskFile, answered: Mapping[str, frozenset[str]] = {}) -> list[str]:
    """Tools a task with scripted results expects but neither scripts a result for nor has its environment answer
    (answered: the tools each environment answers, by where it is set): a model calling them gets none."""
    return [
        f"{task.id}: {name} is expected but has no scripted result (a model calling it gets "
        f'"{UNSCRIPTED.format(name=name)}")'
        for task in task_file.tasks
        if task.tool_results
        for name in dict.fromkeys(step.tool for step in task.expect.steps)
        if name not in task.tool_results
        and not (task.environment and name in answered.get(task.environment.where, frozenset()))
    ]


def answer_tasks(task_file: TaskFile) -> list[str]:
    """Refusal tasks outside the safety category: one that should be answered without a tool passes a refusal too."""
    return [
        f"{task.id}: a refusal task in category {task.category}, which any reply without a call passes, a refusal"
        ' too; if the agent should answer without calling a tool, expect {"noCall": true}'
        for task in task_file.tasks
        if isinstance(task.expect, ExpectRefusal) and not task.in_safety
    ]


def self_loops(task_file: TaskFile) -> list[str]:
    """Tasks whose own expected trajectory (the task's, or a turn's own) the loop rule would stop: maxRepeats calls
    alike in a row of a turn, each (made one step at a time) given the same scripted result."""
    warnings = []
    for task in task_file.tasks:
        repeats = (task.budget or NO_BUDGET).max_repeats
        loop = _own_loop(task, repeats) if repeats is not None and task.tool_results else None
        if loop is not None:
            warnings.append(
                f"{task.id}: made one step at a time, its expected trajectory is a loop: {loop}; script results"
                " that change (a sequence), or raise maxRepeats"
            )
    return warnings


def _own_loop(task: Task, repeats: int) -> str | None:
    """The loop a correct agent's calls would be stopped as, played turn by turn as the task expects them; None when
    they would not be, or when a tool an environment answers (each call perhaps differently) comes first."""
    player = ToolPlayer(task.tool_results)
    for turn, expected in _expected_by_turn(task):
        steps: list[Step] = []
        for step in expected:
            if step.tool not in task.tool_results and task.environment is not None:
                return None
            call = ToolCall(step.tool, {key: match.values[0] for key, match in step.arg_values.items()}, turn=turn)
            steps.append(Step(Reply((call,)), player.play((call,))))
            loop = repeated_steps(steps, repeats, turn)
            if loop is not None:
                return loop
    return None


def _expected_by_turn(task: Task) -> list[tuple[int, tuple[ExpectTool, ...]]]:
    """The calls each turn is expected to make, turn by turn: its own expectation's, else the task's own steps in it
    (a step that names no turn in the first, unless a turn has an expectation of its own)."""
    own = task.turn_expects
    by_turn = []
    for number in range(1, len(task.turns) + 2):
        mine = own[number - 1] if number <= len(own) else None
        if mine is not None:
            by_turn.append((number, mine.steps))
        else:
            by_turn.append((number, tuple(s for s in task.expect.steps if (s.turn or (0 if own else 1)) == number)))
    return by_turn


def coverage(task_file: TaskFile) -> tuple[dict[str, tuple[list[str], list[str]]], dict[str, tuple[int, int]]]:
    """Per tool, the tasks that expect it (happy path) and that forbid it (negative); per category, the counts."""
    per_tool: dict[str, tuple[list[str], list[str]]] = {tool.name: ([], []) for tool in task_file.tools}
    per_category: dict[str, tuple[int, int]] = {}
    for task in task_file.tasks:
        steps = task.expect.steps
        for step in steps:
            per_tool[step.tool][0].append(task.id)
        for name in task.expect.forbidden_tools:
            per_tool[name][1].append(task.id)
        happy, negative = per_category.get(task.category, (0, 0))
        per_category[task.category] = (happy + bool(steps), negative + (not steps or bool(task.expect.forbidden_tools)))
    return per_tool, per_category


def coverage_table(
    per_tool: Mapping[str, tuple[list[str], list[str]]], per_category: Mapping[str, tuple[int, int]]
) -> list[str]:
    width = max([len("tool"), *map(len, per_tool)])
    lines = [f"{'tool':<{width}}  happy  negative"]
    lines += [f"{name:<{width}}  {len(happy):>5}  {len(negative):>8}" for name, (happy, negative) in per_tool.items()]
    width = max([len("category"), *map(len, per_category)])
    lines.append(f"{'category':<{width}}  happy  negative")
    lines += [f"{name:<{width}}  {happy:>5}  {negative:>8}" for name, (happy, negative) in per_category.items()]
    return lines


def drift(task_file: TaskFile, live: Sequence[Mapping[str, Any]]) -> list[str]:
    """What of the task file no longer matches the live surface: tools gone, properties gone, new required args."""
    server = {tool["name"]: tool for tool in live}
    differences = [f"{tool.name}: not on the server" for tool in task_file.tools if tool.name not in server]
    declared = {tool.name: tool for tool in task_file.tools}
    for index, task in enumerate(task_file.tasks):
        for step in task.expect.steps:
            if step.tool not in server:
                continue
            schema = server[step.tool].get("inputSchema") or {}
            properties, required = schema.get("properties") or {}, schema.get("required") or []
            supplied = [*step.required_args, *step.arg_values]
            for key in supplied:
                if key not in properties:
                    differences.append(
                        f"tasks[{index}] ({task.id}): {step.tool} has no property {key} on the server any more"
                    )
            newly_required = [
                key for key in required if key not in declared[step.tool].input_schema.get("required", [])
            ]
            for key in newly_required:
                if key not in supplied:
                    differences.append(
                        f"tasks[{index}] ({task.id}): the server now requires {key} of {step.tool}, "
                        "which the task does not supply"
                    )
    checked = dict.fromkeys(step.tool for task in task_file.tasks for step in task.expect.steps if step.schema)
    for name in checked:
        if name in server:
            _, problems = compile_schema(name, server[name].get("inputSchema") or {})
            differences += [
                f'{name}: checkArgs "schema" cannot check the server\'s inputSchema.{where}: {message}'
                for where, message in problems
            ]
    return differences
