"""A conversation in a task file: the user's follow-up turns, and the results scripted for the agent's tool calls."""

from __future__ import annotations

import json
from typing import Any

from harness.records import ExpectTool, FollowUp, Tool, ToolCase, ToolScript, replace
from harness.taskfile.argchecks import ARG_MATCH_KEYS, arg_values
from harness.taskfile.context import Context, hint, is_list_of_str
from harness.taskfile.expectations import expect, forbidden_text
from harness.taskfile.turnexpect import state_only
from harness.text import JSON_DEPTH, kind, nested_deeper

CASED_KEYS = ("cases", "default")
FAIL_FIRST_KEYS = ("failFirst", "sequence", "cases", "default")
MAX_FAIL_FIRST = 100
CASE_KEYS = ("args", "result")
CASE_SHAPE = '{"args": {...}, "result": ...}'
TURN_KEYS = ("prompt", "expect", "addTools")


def turns(context: Context, value: Any, path: str, task_id: str) -> tuple[FollowUp, ...] | None:
    """The user's follow-up turns: each a non-empty string, or {"prompt", "expect", "addTools"}."""
    if not isinstance(value, list):
        context.problem(path, f"expected a list of the user's follow-up messages, got {kind(value)}")
        return None
    problems = len(context.problems)
    follow_ups = []
    for j, item in enumerate(value):
        where = f"{path}[{j}]"
        if isinstance(item, dict):
            follow_ups.append(_turn(context, item, where, task_id))
        elif isinstance(item, str) and item.strip():
            follow_ups.append(FollowUp(item))
        else:
            also = "" if isinstance(item, str) else " or a turn object"
            context.problem(where, f"expected a non-empty string{also}, got {kind(item)}")
    return tuple(f for f in follow_ups if f is not None) if len(context.problems) == problems else None


def _turn(context: Context, item: dict[str, Any], path: str, task_id: str) -> FollowUp | None:
    """A turn object: its message, the expectation judged on this turn's calls alone, and the tools it adds."""
    context.unknown_keys(item, TURN_KEYS, path)
    prompt = context.text(item, "prompt", path)
    added = item.get("addTools", [])
    if not is_list_of_str(added):
        context.problem(f"{path}.addTools", f"expected a list of names from the file's tools, got {kind(added)}")
        added = []
    for i, name in enumerate(added):
        context.unlisted(name, f"{path}.addTools[{i}]")
    expected = None
    if "expect" in item and not state_only(item["expect"]):
        expected = expect(context, item["expect"], f"{path}.expect", within_turn=True)
        forbidden = forbidden_text(context, item["expect"], f"{path}.expect", task_id)
        expected = replace(expected, forbidden_text=forbidden) if expected and forbidden else expected
        if expected is None:
            return None
    return None if prompt is None else FollowUp(prompt, expected, tuple(added))


def tool_results(context: Context, value: Any, path: str) -> dict[str, ToolScript] | None:
    """Scripted tool results by tool name: a result for every call, {"sequence": [...]} call by call, or
    {"cases": [...], "default": ...}, the result by the call's arguments."""
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
        if isinstance(script, dict) and "failFirst" in script:
            failing = _failing(context, script, where, tool)
            if failing is not None:
                scripts[name] = failing
            continue
        if _is_cased(script):
            cased = _cased(context, script, where, tool)
            if cased is not None:
                scripts[name] = cased
            continue
        results = _played(context, script, where, tool)
        if results is not None:
            scripts[name] = ToolScript(results)
    return scripts if len(context.problems) == problems else None


def _failing(context: Context, script: dict[str, Any], path: str, tool: Tool) -> ToolScript | None:
    """A script whose first failFirst calls in a trial fail, as a flaky tool does, before the rest of it answers: a
    sequence, cases and a default, or nothing more (an environment's method)."""
    context.unknown_keys(script, FAIL_FIRST_KEYS, path)
    count = script["failFirst"]
    if not isinstance(count, int) or isinstance(count, bool) or not 1 <= count <= MAX_FAIL_FIRST:
        got = json.dumps(count) if isinstance(count, (int, float)) and not isinstance(count, bool) else kind(count)
        context.problem(f"{path}.failFirst", f"expected a whole number from 1 to {MAX_FAIL_FIRST}, got {got}")
        return None
    rest = {key: value for key, value in script.items() if key in FAIL_FIRST_KEYS[1:]}
    if "sequence" in rest and len(rest) > 1:
        context.problem(path, "a sequence, or cases and a default: not both")
        return None
    if not rest:
        return ToolScript((), fail_first=count)
    if "sequence" in rest:
        results = _played(context, rest, path, tool)
        return None if results is None else ToolScript(results, fail_first=count)
    cased = _cased(context, rest, path, tool)
    return None if cased is None else replace(cased, fail_first=count)


def script_definition(script: ToolScript) -> Any:
    """A tool's script as a task's hash reads it: its results, and with cases, each case's arguments and results; with
    failFirst, that too."""
    if script.fail_first:
        return {"failFirst": script.fail_first, "then": script_definition(replace(script, fail_first=0))}
    if not script.cases:
        return list(script.results)
    return {
        "cases": [
            {
                "args": {
                    key: {
                        "anyOf": list(match.values),
                        "ignoreCase": match.ignore_case,
                        "ignorePunctuation": match.ignore_punctuation,
                        "optional": match.optional,
                    }
                    for key, match in case.when.arg_values.items()
                },
                "result": list(case.results),
            }
            for case in script.cases
        ],
        "default": list(script.results),
    }


def _is_cased(script: Any) -> bool:
    """An object of `cases` and `default` alone, or with a list of cases (each with `args`) beside other keys, which
    are then misspelt; any other object is a result, as it always was."""
    if not isinstance(script, dict) or not script:
        return False
    if set(script) <= set(CASED_KEYS):
        return True
    cases = script.get("cases")
    return isinstance(cases, list) and bool(cases) and all(isinstance(case, dict) and "args" in case for case in cases)


def _cased(context: Context, script: dict[str, Any], path: str, tool: Tool) -> ToolScript | None:
    """Results by the call's arguments: the first case whose args all match gives it, else the default."""
    context.unknown_keys(script, CASED_KEYS, path)
    default = _played(context, script["default"], f"{path}.default", tool) if "default" in script else ()
    entries = script.get("cases", [])
    if "cases" in script and (not isinstance(entries, list) or not entries):
        got = "an empty list" if entries == [] else kind(entries)
        context.problem(f"{path}.cases", f"expected a non-empty list of {CASE_SHAPE}, got {got}")
        return None
    cases = []
    for j, entry in enumerate(entries):
        where = f"{path}.cases[{j}]"
        if not isinstance(entry, dict):
            context.problem(where, f"expected {CASE_SHAPE}, got {kind(entry)}")
            continue
        context.unknown_keys(entry, CASE_KEYS, where)
        when = _case_args(context, entry, f"{where}.args", tool)
        if "result" not in entry:
            context.problem(f"{where}.result", "missing: expected the result for the calls it matches")
            continue
        results = _played(context, entry["result"], f"{where}.result", tool)
        if when is not None and results is not None:
            cases.append(ToolCase(when, results))
    return None if default is None or len(cases) != len(entries) else ToolScript(default, tuple(cases))


def _case_args(context: Context, entry: dict[str, Any], path: str, tool: Tool) -> ExpectTool | None:
    """The arguments a case matches: each a value compared by JSON equality, or argValues' long form."""
    if "args" not in entry:
        context.problem(path, "missing: expected an object of argument names to values")
        return None
    args = entry["args"]
    if not isinstance(args, dict):
        context.problem(path, f"expected an object of argument names to values, got {kind(args)}")
        return None
    accepted = {key: value if _is_long_form(value) else [value] for key, value in args.items()}
    matches = arg_values(context, accepted, path, tool, tool.input_schema.get("properties", {}), [])
    return None if matches is None else ExpectTool(tool.name, arg_values=matches)


def _is_long_form(value: Any) -> bool:
    """argValues' long form, {"anyOf": [...], "ignoreCase": true}: an object with any of its keys."""
    return isinstance(value, dict) and any(key in ARG_MATCH_KEYS for key in value)


def _played(context: Context, script: Any, path: str, tool: Tool) -> tuple[Any, ...] | None:
    """A result for every call, or {"sequence": [...]}, one per call; each {"echo": KEY} naming an argument."""
    sequence = isinstance(script, dict) and list(script) == ["sequence"]
    results = script["sequence"] if sequence else [script]
    if not isinstance(results, list) or not results:
        context.problem(f"{path}.sequence", "expected a non-empty list of results, one per call")
        return None
    for j, result in enumerate(results):
        where = f"{path}.sequence[{j}]" if sequence else path
        if nested_deeper(result, JSON_DEPTH):
            context.problem(where, f"nested more than {JSON_DEPTH} levels deep")
        else:
            _echoes(context, result, where, tool)
    return tuple(results)


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
