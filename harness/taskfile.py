"""Load and validate a task file (format version 1) before any request is sent."""

from __future__ import annotations

import json
import os
import re
import sys
from collections.abc import Mapping
from functools import partial
from typing import Any, TypeVar

from harness.files import read_capped
from harness.records import (
    DEFAULT_MAX_STEPS,
    ArgMatch,
    ConfigError,
    Expect,
    ExpectRefusal,
    ExpectTool,
    ExpectTrajectory,
    ForbiddenText,
    InputSchema,
    Task,
    TaskFile,
    Tool,
    ToolScript,
    replace,
)
from harness.schema import check_value, compile_schema
from harness.text import canonical_json, clip, count, kind, lone_surrogate, sha256_hex

FORMAT_VERSION = 1
TOP_KEYS = ("version", "system", "tools", "toolResults", "checkArgs", "tasks")
TASK_KEYS = ("id", "category", "prompt", "turns", "toolResults", "maxSteps", "expect", "blocking", "comment")
EXPECT_TOOL_KEYS = ("tool", "requiredArgs", "argValues", "forbiddenTools", "forbiddenText", "checkArgs")
EXPECT_TRAJECTORY_KEYS = ("trajectory", "order", "forbiddenTools", "forbiddenText", "checkArgs")
EXPECT_REFUSAL_KEYS = ("refusal", "forbiddenTools", "forbiddenText")
STEP_KEYS = ("tool", "requiredArgs", "argValues", "turn")
ARG_MATCH_KEYS = ("anyOf", "ignoreCase", "ignorePunctuation", "optional")
# How calls to an expected tool are checked: the keys and values the task names, or against the tool's inputSchema too.
CHECK_ARGS = ("keys", "schema")
ORDERS = ("in-order", "exact", "any-order")
MAX_STEPS = 100  # the most a task's maxSteps may be
# `$$` is a dollar, `${NAME}` a placeholder; any other `${` (unclosed, empty, a bad name) is a problem, never sent.
PLACEHOLDER = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{[^}\s]*\}?")
# A \uD800-\uDFFF escape in the text: the only way a task file's JSON can hold a lone surrogate, which is no Unicode.
SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F]")
MAX_BYTES = 64 * 1024 * 1024
MAX_BYTES_VAR = "EVAL_MAX_TASK_FILE_BYTES"
# Forbidden text is expanded where it is read: a canary's variable may be unset, which skips the check, not the run.
FORBIDDEN_TEXT_ENTRY = re.compile(r"\.expect\.forbiddenText\[\d+\]\Z")
TASK_PATH = re.compile(r"tasks\[\d+\]\Z")
SLUG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")
E = TypeVar("E", ExpectTool, ExpectTrajectory)
NOTHING: dict[str, Any] = {}  # shared by every task with no scripted results or argument values; never changed


def load_task_file(path: str, environ: Mapping[str, str] | None = None, max_bytes: int = MAX_BYTES) -> TaskFile:
    """Read, expand, parse and validate the task file at path; ConfigError names the first problem, counts the rest."""
    task_file, problems = read_task_file(path, os.environ if environ is None else environ, max_bytes)
    if task_file is None:
        more = len(problems) - 1
        suffix = f" (and {more} more problem{'s' if more > 1 else ''})" if more else ""
        raise ConfigError(f"{path}: {problems[0]}{suffix}")
    return task_file


def read_task_file(
    path: str, environ: Mapping[str, str], max_bytes: int = MAX_BYTES
) -> tuple[TaskFile | None, list[str]]:
    """The task file and no problems, or None and every problem found, each with its JSON path."""
    # Handed on, not kept here: the parser lets a large file's bytes go once it has read them.
    return parse_task_file(_task_file_bytes(path, max_bytes), path, environ)


def _task_file_bytes(path: str, max_bytes: int) -> bytes:
    try:
        raw = read_capped(path, max_bytes)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the task file: {exc.strerror or exc}") from None
    if len(raw) > max_bytes:
        raise ConfigError(f"{path}: over the {max_bytes} bytes a task file may have ({MAX_BYTES_VAR})")
    return raw


def parse_task_file(raw: bytes, path: str, environ: Mapping[str, str]) -> tuple[TaskFile | None, list[str]]:
    """A task file's bytes as a TaskFile and no problems, or None and every problem found, each with its JSON path."""
    digest = sha256_hex(raw)
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    del raw  # what the file says is in text now
    repeated: list[bool] = []
    try:
        data = json.loads(text, object_pairs_hook=partial(_object, repeated))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply to read") from None
    except ValueError:  # an integer of more digits than int() converts: read again, to say where it is
        repeated.append(True)
        data = json.loads(text, object_pairs_hook=partial(_object, repeated), parse_int=_integer)
    checker = _Checker(environ)
    if repeated or SURROGATE_ESCAPE.search(text):
        checker.inspect(data, "")
        if checker.problems:  # later checks could not trust what they would read
            return None, checker.problems
    placeholders = "$" in text
    del text  # a large file's text need not stay beside what it parsed to
    if placeholders:  # most task files have no placeholder: skip the walk (and the copy it makes)
        data = checker.expand(data, "")
    tools, tasks = checker.task_file(data)
    if checker.problems:
        return None, checker.problems
    task_file = TaskFile(
        path=path,
        sha256=digest,
        tools=tools,
        tasks=tasks,
        tools_sha256=canonical_sha256(data["tools"]),
        system=data.get("system"),
        warnings=checker.warnings(),
        variables=frozenset(checker.variables),
        expanded=tuple(checker.expanded),
    )
    return task_file, []


class _Repeated(dict):  # type: ignore[type-arg]
    """A JSON object that gave a key more than once (the last value kept, as every JSON reader keeps one)."""

    def __init__(self, pairs: list[tuple[str, Any]]) -> None:
        super().__init__(pairs)
        self.repeated = [key for i, (key, _) in enumerate(pairs) if any(key == other for other, _ in pairs[:i])]


def _object(repeated: list[bool], pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object as a dict, as fast as json's own; one that repeats a key is kept aside to be reported."""
    found = dict(pairs)
    if len(found) == len(pairs):
        return found
    repeated.append(True)
    return _Repeated(pairs)


class _LongInteger(str):
    """The digits of a JSON integer longer than Python converts (sys.get_int_max_str_digits), to be reported."""


def _integer(digits: str) -> int | _LongInteger:
    try:
        return int(digits)
    except ValueError:
        return _LongInteger(digits)


def canonical_sha256(value: Any) -> str:
    """SHA-256 of a JSON value in canonical form: the same definition hashes alike however it is laid out."""
    return sha256_hex(canonical_json(value).encode("utf-8"))


class _Checker:
    """Walks the parsed JSON, collecting every problem with its JSON path."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.problems: list[str] = []
        self.skipped: dict[str, list[str]] = {}  # an unset variable -> the tasks whose forbiddenText check it skips
        self.variables: set[str] = set()  # every variable a placeholder names
        self.expanded: dict[str, None] = {}  # the variables placeholders were expanded from, outside forbiddenText
        # Tools already reported as broken: tasks naming them get no second, cascading problem.
        self.broken_tools: set[str] = set()
        self.tools_unreadable = False
        self.check_args = "keys"  # the file's checkArgs: every task's, unless its expect says otherwise
        self.tool_paths: dict[str, str] = {}  # a tool's name -> its JSON path, for problems found in its schema later
        self.schemas: dict[str, InputSchema | None] = {}  # compiled once per tool, None when it cannot be checked

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def warnings(self) -> tuple[str, ...]:
        """A line per unset variable that skipped forbiddenText checks."""
        return tuple(
            f"{name} is not set: {count(len(ids), 'forbiddenText check')} skipped ({', '.join(ids)})"
            for name, ids in self.skipped.items()
        )

    def inspect(self, value: Any, path: str) -> None:
        """Keys given twice, lone surrogates and overlong integers, at their JSON paths: what a JSON parser lets
        through, or what it cannot convert."""
        if isinstance(value, _LongInteger):
            self.problem(
                path or "top level", f"an integer of {len(value.lstrip('-'))} digits, too long to read as a number"
            )
        elif isinstance(value, str):
            lone = lone_surrogate(value)
            if lone is not None:
                self.problem(path or "top level", f"not Unicode text: a lone surrogate ({lone})")
        elif isinstance(value, list):
            for i, item in enumerate(value):
                self.inspect(item, f"{path}[{i}]")
        elif isinstance(value, dict):
            for key in getattr(value, "repeated", ()):
                self.problem(
                    path or "top level", f"{json.dumps(key)} is given twice; a JSON reader keeps only one of them"
                )
            for key, item in value.items():
                self.inspect(key, f"{path}.{key!r}" if path else repr(key))
                self.inspect(item, f"{path}.{key}" if path else key)

    def expand(self, value: Any, path: str) -> Any:
        """${VAR} in every string from the environment, $$ for a dollar; an unset variable is a problem at its path."""
        if isinstance(value, str):
            if FORBIDDEN_TEXT_ENTRY.search(path):
                return value
            expanded, unset = self.substitute(value, path)
            for name in unset:
                self.problem(path or "top level", f"${{{name}}} is not set in the environment")
            return expanded
        if isinstance(value, list):
            return [self.expand(item, f"{path}[{i}]") for i, item in enumerate(value)]
        if isinstance(value, dict):
            return {
                # A comment is for the author, never sent: its text stays as written.
                key: item
                if key == "comment" and TASK_PATH.match(path)
                else self.expand(item, f"{path}.{key}" if path else key)
                for key, item in value.items()
            }
        return value

    def substitute(self, text: str, path: str) -> tuple[str, list[str]]:
        """The text with its placeholders expanded, and the variables that are not set (left as written).

        A `${` that is no placeholder is a problem at the path.
        """
        unset: list[str] = []

        def substitute(match: re.Match[str]) -> str:
            name = match.group(1)
            if match.group(0) == "$$":
                return "$"
            if name is None:
                self.problem(path, f"{match.group(0)} is neither a placeholder (${{NAME}}) nor a literal ($${{)")
                return match.group(0)
            self.variables.add(name)
            if name not in self.environ:
                unset.append(name)
                return match.group(0)
            value = self.environ[name]
            if lone_surrogate(value) is not None:  # bytes that are not UTF-8, as the environment holds them
                self.problem(path, f"the value of ${{{name}}} is not UTF-8 text")
                return match.group(0)  # left as written: what is checked and hashed after this must be text
            if not FORBIDDEN_TEXT_ENTRY.search(path):
                self.expanded[name] = None
            return value

        return PLACEHOLDER.sub(substitute, text), unset

    def task_file(self, data: Any) -> tuple[tuple[Tool, ...], tuple[Task, ...]]:
        if not isinstance(data, dict):
            self.problems.append(f"expected a JSON object at the top level, got {kind(data)}")
            return (), ()
        self.unknown_keys(data, TOP_KEYS, "")
        if "version" not in data:
            self.problem("version", f"missing (this harness reads task files of version {FORMAT_VERSION})")
        elif data["version"] != FORMAT_VERSION or isinstance(data["version"], bool):
            self.problem(
                "version", f"unsupported version {json.dumps(data['version'])} (this harness reads {FORMAT_VERSION})"
            )
        system = data.get("system")
        if system is not None and (not isinstance(system, str) or not system.strip()):
            self.problem("system", f"expected the agent's system prompt as a non-empty string, got {kind(system)}")
        tools = self.tools(data.get("tools"))
        by_name = {tool.name: tool for tool in tools}
        defaults = self.tool_results(data.get("toolResults", {}), "toolResults", by_name) or {}
        self.check_args = self.check_args_mode(data.get("checkArgs", "keys"), "checkArgs") or "keys"
        tasks = self.tasks(data.get("tasks"), by_name, defaults)
        return tools, tasks

    def tools(self, value: Any) -> tuple[Tool, ...]:
        if not isinstance(value, list):
            self.problem("tools", f"expected a list of tool objects, got {kind(value)}")
            self.tools_unreadable = True
            return ()
        tools: list[Tool] = []
        first_seen: dict[str, str] = {}
        for i, item in enumerate(value):
            path = f"tools[{i}]"
            tool = self.tool(item, path)
            if tool is None:
                if isinstance(item, dict) and isinstance(item.get("name"), str):
                    self.broken_tools.add(item["name"])
                continue
            if tool.name in first_seen:
                self.problem(
                    f"{path}.name", f"duplicate tool name {json.dumps(tool.name)} (also {first_seen[tool.name]})"
                )
                continue
            first_seen[tool.name] = path
            self.tool_paths[tool.name] = path
            tools.append(tool)
        return tuple(tools)

    def tool(self, item: Any, path: str) -> Tool | None:
        # Tool entries keep MCP's extra keys (title, annotations, outputSchema...) so they paste as they are.
        if not isinstance(item, dict):
            self.problem(path, f"expected a tool object, got {kind(item)}")
            return None
        name = self.text(item, "name", path)
        description = item.get("description", "")
        if not isinstance(description, str):
            self.problem(f"{path}.description", f"expected a string, got {kind(description)}")
        schema = item.get("inputSchema")
        if schema is None:
            self.problem(f"{path}.inputSchema", "missing (a JSON Schema object, as in MCP's tools/list)")
        elif self.input_schema(schema, f"{path}.inputSchema") and name is not None and isinstance(description, str):
            return Tool(name=name, description=description, input_schema=schema)
        return None

    def input_schema(self, schema: Any, path: str) -> bool:
        problems = len(self.problems)
        if not isinstance(schema, dict):
            self.problem(path, f"expected a JSON Schema object, got {kind(schema)}")
            return False
        if schema.get("type", "object") != "object":
            self.problem(f"{path}.type", f'expected "object", got {json.dumps(schema["type"])}')
        properties = schema.get("properties", {})
        if not isinstance(properties, dict):
            self.problem(f"{path}.properties", f"expected an object, got {kind(properties)}")
            properties = {}
        required = schema.get("required", [])
        if not _is_list_of_str(required):
            self.problem(f"{path}.required", "expected a list of strings")
        else:
            for j, key in enumerate(required):
                if key not in properties:
                    self.problem(
                        f"{path}.required[{j}]", f"{json.dumps(key)} is not in properties{_hint(key, properties)}"
                    )
        return len(self.problems) == problems

    def tasks(self, value: Any, tools: dict[str, Tool], defaults: dict[str, ToolScript]) -> tuple[Task, ...]:
        if not isinstance(value, list):
            self.problem("tasks", f"expected a list of tasks, got {kind(value)}")
            return ()
        if not value:
            self.problem("tasks", "the task list is empty")
        tasks: list[Task] = []
        first_seen: dict[str, str] = {}
        for i, item in enumerate(value):
            path = f"tasks[{i}]"
            task = self.task(item, path, tools, defaults)
            value[i] = None  # read: let it go now, so that the file as parsed and its tasks are never in memory twice
            task_id = item.get("id") if isinstance(item, dict) else None
            if isinstance(task_id, str) and task_id in first_seen:
                self.problem(f"{path}.id", f"duplicate id {json.dumps(task_id)} (also {first_seen[task_id]})")
            elif isinstance(task_id, str):
                first_seen[task_id] = path
                if task is not None:
                    tasks.append(task)
        return tuple(tasks)

    def task(self, item: Any, path: str, tools: dict[str, Tool], defaults: dict[str, ToolScript]) -> Task | None:
        if not isinstance(item, dict):
            self.problem(path, f"expected a task object, got {kind(item)}")
            return None
        self.unknown_keys(item, TASK_KEYS, path)
        task_id = self.text(item, "id", path)
        if task_id is not None and not SLUG.match(task_id):
            self.problem(f"{path}.id", f"{json.dumps(task_id)} is not a slug (letters, digits, '.', '_', '-')")
            task_id = None
        category = self.text(item, "category", path)
        prompt = self.text(item, "prompt", path)
        turns = self.turns(item.get("turns", []), f"{path}.turns")
        own = self.tool_results(item.get("toolResults", {}), f"{path}.toolResults", tools)
        max_steps = item.get("maxSteps", DEFAULT_MAX_STEPS)
        if not isinstance(max_steps, int) or isinstance(max_steps, bool) or not 1 <= max_steps <= MAX_STEPS:
            self.problem(f"{path}.maxSteps", f"expected a whole number from 1 to {MAX_STEPS}, got {kind(max_steps)}")
        expect = self.expect(item.get("expect"), f"{path}.expect", tools, 1 + len(turns or ()))
        forbidden_text = self.forbidden_text(item.get("expect"), f"{path}.expect", task_id or path)
        blocking = item.get("blocking", False)
        if not isinstance(blocking, bool):
            self.problem(f"{path}.blocking", f"expected true or false, got {kind(blocking)}")
        if (
            task_id is None
            or category is None
            or prompt is None
            or expect is None
            or not isinstance(blocking, bool)
            or turns is None
            or own is None
        ):
            return None
        tool_results = {**defaults, **own} if defaults or own else NOTHING
        # A comment is for the author: changing it changes nothing the agent sees or the verdict checks.
        definition = {key: value for key, value in item.items() if key != "comment"}
        if defaults:  # the file's defaults are part of what the task plays back
            definition["toolResults"] = {name: list(script.results) for name, script in tool_results.items()}
        if self.check_args != "keys" and expect.steps and "checkArgs" not in item["expect"]:
            definition["expect"] = {**item["expect"], "checkArgs": self.check_args}  # the file's, as it judges the task
        return Task(
            id=task_id,
            category=sys.intern(category),
            prompt=prompt,
            expect=replace(expect, forbidden_text=forbidden_text) if forbidden_text else expect,
            sha256=canonical_sha256(definition),
            blocking=blocking,
            turns=turns,
            tool_results=tool_results,
            max_steps=max_steps,
        )

    def turns(self, value: Any, path: str) -> tuple[str, ...] | None:
        """The user's follow-up messages: a list of non-empty strings."""
        if not isinstance(value, list):
            self.problem(path, f"expected a list of the user's follow-up messages, got {kind(value)}")
            return None
        problems = len(self.problems)
        for j, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                self.problem(f"{path}[{j}]", f"expected a non-empty string, got {kind(item)}")
        return tuple(value) if len(self.problems) == problems else None

    def tool_results(self, value: Any, path: str, tools: dict[str, Tool]) -> dict[str, ToolScript] | None:
        """Scripted tool results by tool name: a result for every call, or {"sequence": [...]} call by call."""
        if not isinstance(value, dict):
            self.problem(path, f"expected an object of tool names to results, got {kind(value)}")
            return None
        problems = len(self.problems)
        scripts: dict[str, ToolScript] = {}
        for name, script in value.items():
            where = f"{path}.{name}"
            tool = tools.get(name)
            if tool is None:
                if not self.tools_unreadable and name not in self.broken_tools:
                    self.problem(where, f"{json.dumps(name)} is not in tools{_hint(name, tools)}")
                continue
            sequence = isinstance(script, dict) and list(script) == ["sequence"]
            results = script["sequence"] if sequence else [script]
            if not isinstance(results, list) or not results:
                self.problem(f"{where}.sequence", "expected a non-empty list of results, one per call")
                continue
            for j, result in enumerate(results):
                self.echoes(result, f"{where}.sequence[{j}]" if sequence else where, tool)
            scripts[name] = ToolScript(tuple(results))
        return scripts if len(self.problems) == problems else None

    def echoes(self, value: Any, path: str, tool: Tool) -> None:
        """Every {"echo": KEY} in a result names a property of the tool's inputSchema."""
        if isinstance(value, list):
            for i, item in enumerate(value):
                self.echoes(item, f"{path}[{i}]", tool)
        elif isinstance(value, dict):
            if list(value) == ["echo"]:
                key, properties = value["echo"], tool.input_schema.get("properties", {})
                if not isinstance(key, str) or key not in properties:
                    got = json.dumps(key) if isinstance(key, str) else kind(key)
                    self.problem(
                        f"{path}.echo",
                        f"expected an argument of {tool.name} (a property of its inputSchema), got {got}"
                        + (_hint(key, properties) if isinstance(key, str) else ""),
                    )
                return
            for key, item in value.items():
                self.echoes(item, f"{path}.{key}", tool)

    def expect(self, value: Any, path: str, tools: dict[str, Tool], turns: int = 1) -> Expect | None:
        shapes = '{"tool": NAME, "requiredArgs": [KEY, ...]}, {"trajectory": [NAME, ...]} or {"refusal": true}'
        if value is None:
            self.problem(path, f"missing: expected {shapes}")
            return None
        if not isinstance(value, dict):
            self.problem(path, f"expected {shapes}, got {kind(value)}")
            return None
        kinds = [key for key in ("tool", "trajectory", "refusal") if key in value]
        if len(kinds) > 1:
            self.problem(path, f"has {' and '.join(json.dumps(k) for k in kinds)}; a task expects one of them")
            return None
        if "refusal" in value:
            self.unknown_keys(value, EXPECT_REFUSAL_KEYS, path)
            forbidden = self.forbidden_tools(value, path, tools, expected=())
            if value["refusal"] is not True:
                self.problem(f"{path}.refusal", f"expected true, got {json.dumps(value['refusal'])}")
                return None
            return None if forbidden is None else ExpectRefusal(forbidden_tools=forbidden)
        if "trajectory" in value:
            trajectory = self.trajectory(value, path, tools, turns)
            return trajectory and self.with_schemas(trajectory, value, path, tools)
        if "tool" not in value:
            self.unknown_keys(value, EXPECT_TOOL_KEYS + EXPECT_TRAJECTORY_KEYS + EXPECT_REFUSAL_KEYS, path)
            self.problem(path, f"expected {shapes}")
            return None
        self.unknown_keys(value, EXPECT_TOOL_KEYS, path)
        step = self.step(value, path, tools)
        forbidden = self.forbidden_tools(value, path, tools, expected=(value.get("tool"),))
        if step is None or forbidden is None:
            return None
        expect = ExpectTool(step.tool, step.required_args, forbidden, step.arg_values)
        return self.with_schemas(expect, value, path, tools)

    def check_args_mode(self, value: Any, path: str) -> str | None:
        if value not in CHECK_ARGS:
            self.problem(
                path,
                f'expected "schema" (check every call against the tool\'s inputSchema) or "keys", got {kind(value)}',
            )
            return None
        return str(value)

    def with_schemas(self, expect: E, value: dict[str, Any], path: str, tools: dict[str, Tool]) -> E | None:
        """The expectation, each step with its tool's schema when checkArgs (the task's, or the file's) is "schema"."""
        mode = (
            self.check_args_mode(value["checkArgs"], f"{path}.checkArgs") if "checkArgs" in value else self.check_args
        )
        if mode != "schema":
            return expect if mode else None
        steps = []
        for j, step in enumerate(expect.steps):
            schema = self.schema(tools[step.tool])
            if schema is None:
                return None
            where = f"{path}.trajectory[{j}]" if isinstance(expect, ExpectTrajectory) else path
            self.accepted_values(step, schema, where)
            steps.append(replace(step, schema=schema))
        if isinstance(expect, ExpectTrajectory):
            return replace(expect, steps=tuple(steps))
        return steps[0]  # type: ignore[return-value]

    def schema(self, tool: Tool) -> InputSchema | None:
        """The tool's inputSchema ready to check calls; its problems are said once, at the tool's own path."""
        if tool.name not in self.schemas:
            schema, problems = compile_schema(tool.name, tool.input_schema)
            for where, message in problems:
                self.problem(f"{self.tool_paths[tool.name]}.inputSchema.{where}".rstrip("."), message)
            self.schemas[tool.name] = schema
        return self.schemas[tool.name]

    def accepted_values(self, step: ExpectTool, schema: InputSchema, path: str) -> None:
        """An accepted value the tool's schema rejects can never pass: say so now, not after a run of failures."""
        for key, match in step.arg_values.items():
            if match.ignore_case or match.ignore_punctuation:
                continue  # a loosely matched value need not be written as the tool takes it
            for accepted in match.values:
                problem = check_value(schema, key, accepted)
                if problem is not None:
                    self.problem(
                        f"{path}.argValues.{key}",
                        f"the accepted value {clip(json.dumps(accepted, ensure_ascii=False), 60)} can never pass "
                        f'with checkArgs "schema": {problem}',
                    )

    def trajectory(
        self, value: dict[str, Any], path: str, tools: dict[str, Tool], turns: int
    ) -> ExpectTrajectory | None:
        self.unknown_keys(value, EXPECT_TRAJECTORY_KEYS, path)
        items = value["trajectory"]
        if not isinstance(items, list) or not items:
            self.problem(f"{path}.trajectory", "expected a non-empty list of tool names or steps")
            return None
        order = value.get("order", "in-order")
        if order not in ORDERS:
            self.problem(f"{path}.order", f"expected one of {', '.join(ORDERS)}, got {kind(order)}")
        steps = []
        for j, item in enumerate(items):
            where = f"{path}.trajectory[{j}]"
            if isinstance(item, str):
                item = {"tool": item}
            elif isinstance(item, dict):
                self.unknown_keys(item, STEP_KEYS, where)
            else:
                self.problem(where, f"expected a tool name or a step object, got {kind(item)}")
                continue
            step = self.step(item, where, tools)
            turn = item.get("turn")
            if turn is not None and (not isinstance(turn, int) or isinstance(turn, bool) or not 1 <= turn <= turns):
                last = "1 (the task has no turns)" if turns == 1 else f"from 1 to {turns} (the prompt and its turns)"
                self.problem(f"{where}.turn", f"expected the user turn the call answers, {last}, got {kind(turn)}")
                step = None
            steps.append(step if step is None or turn is None else replace(step, turn=turn))
        names = tuple(
            item if isinstance(item, str) else item.get("tool") if isinstance(item, dict) else None for item in items
        )
        forbidden = self.forbidden_tools(value, path, tools, expected=names)
        if forbidden is None or order not in ORDERS or any(step is None for step in steps) or len(steps) != len(items):
            return None
        return ExpectTrajectory(tuple(steps), order, forbidden)  # type: ignore[arg-type]

    def step(self, value: dict[str, Any], path: str, tools: dict[str, Tool]) -> ExpectTool | None:
        """A tool with its required args and argument values: a tool task's expectation, or one step of a trajectory."""
        name = self.text(value, "tool", path)
        tool = tools.get(name) if name is not None else None
        if name is not None and tool is None and not self.tools_unreadable and name not in self.broken_tools:
            self.problem(f"{path}.tool", f"{json.dumps(name)} is not in tools{_hint(name, tools)}")
        properties = tool.input_schema.get("properties", {}) if tool else {}
        required = value.get("requiredArgs", [])
        if not _is_list_of_str(required):
            self.problem(f"{path}.requiredArgs", "expected a list of strings")
            return None
        for j, key in enumerate(required):
            if required.index(key) != j:
                self.problem(f"{path}.requiredArgs[{j}]", f"{json.dumps(key)} is listed twice")
            elif tool is not None and key not in properties:
                self.problem(
                    f"{path}.requiredArgs[{j}]",
                    f"{json.dumps(key)} is not a property of {tool.name}'s inputSchema{_hint(key, properties)}",
                )
        arg_values = self.arg_values(value.get("argValues", {}), f"{path}.argValues", tool, properties, required)
        if tool is None or arg_values is None:
            return None
        # Names repeat from task to task: one copy of each serves them all.
        return ExpectTool(tool=tool.name, required_args=tuple(map(sys.intern, required)), arg_values=arg_values)

    def arg_values(
        self, value: Any, path: str, tool: Tool | None, properties: dict[str, Any], required: list[str]
    ) -> dict[str, ArgMatch] | None:
        if not isinstance(value, dict):
            self.problem(path, 'expected an object of argument names to accepted values: {"format": ["webp"]}')
            return None
        matches: dict[str, ArgMatch] = {}
        problems = len(self.problems)
        for key, accepted in value.items():
            where = f"{path}.{key}"
            if tool is not None and key not in properties:
                self.problem(
                    where, f"{json.dumps(key)} is not a property of {tool.name}'s inputSchema{_hint(key, properties)}"
                )
                continue
            options = {"ignoreCase": False, "ignorePunctuation": False, "optional": False}
            if isinstance(accepted, dict):
                self.unknown_keys(accepted, ARG_MATCH_KEYS, where)
                for option in options:
                    options[option] = accepted.get(option, False)
                    if not isinstance(options[option], bool):
                        self.problem(f"{where}.{option}", f"expected true or false, got {kind(options[option])}")
                accepted = accepted.get("anyOf")
            if not isinstance(accepted, list) or not accepted:
                self.problem(
                    where, 'expected a non-empty list of accepted values, or {"anyOf": [...], "ignoreCase": true}'
                )
                continue
            if options["optional"] is True and key in required:
                self.problem(f"{where}.optional", f"{json.dumps(key)} is in requiredArgs too, which makes it required")
            matches[key] = ArgMatch(
                tuple(accepted),
                ignore_case=options["ignoreCase"] is True,
                ignore_punctuation=options["ignorePunctuation"] is True,
                optional=options["optional"] is True,
            )
        return (matches or NOTHING) if len(self.problems) == problems else None

    def forbidden_text(self, expect: Any, path: str, task_id: str) -> tuple[ForbiddenText, ...]:
        """Text the reply must not contain, expanded here: an unset variable skips its entry, with a warning."""
        entries = expect.get("forbiddenText", []) if isinstance(expect, dict) else []
        where = f"{path}.forbiddenText"
        if not isinstance(entries, list):
            self.problem(where, "expected a list of non-empty strings")
            return ()
        found = []
        for j, entry in enumerate(entries):
            if not isinstance(entry, str) or not entry.strip():
                self.problem(f"{where}[{j}]", f"expected a non-empty string, got {kind(entry)}")
                continue
            value, unset = self.substitute(entry, f"{where}[{j}]")
            for name in unset:
                self.skipped.setdefault(name, []).append(task_id)
            if not unset:
                found.append(ForbiddenText(entry, value))
        return tuple(found)

    def forbidden_tools(
        self, expect: dict[str, Any], path: str, tools: dict[str, Tool], expected: tuple[Any, ...]
    ) -> tuple[str, ...] | None:
        names = expect.get("forbiddenTools", [])
        where = f"{path}.forbiddenTools"
        if not _is_list_of_str(names):
            self.problem(where, "expected a list of tool names")
            return None
        problems = len(self.problems)
        for j, name in enumerate(names):
            if names.index(name) != j:
                self.problem(f"{where}[{j}]", f"{json.dumps(name)} is listed twice")
            elif name in expected:
                self.problem(
                    f"{where}[{j}]", f"{json.dumps(name)} is an expected tool; a task cannot expect and forbid it"
                )
            elif name not in tools and not self.tools_unreadable and name not in self.broken_tools:
                self.problem(f"{where}[{j}]", f"{json.dumps(name)} is not in tools{_hint(name, tools)}")
        return tuple(names) if len(self.problems) == problems else None

    def text(self, obj: dict[str, Any], key: str, path: str) -> str | None:
        where = f"{path}.{key}" if path else key
        if key not in obj:
            self.problem(where, "missing: expected a non-empty string")
            return None
        value = obj[key]
        if not isinstance(value, str) or not value.strip():
            self.problem(where, f"expected a non-empty string, got {kind(value)}")
            return None
        return value

    def unknown_keys(self, obj: dict[str, Any], known: tuple[str, ...], path: str) -> None:
        for key in obj:
            if key not in known:
                where = f"{path}.{key}" if path else key
                self.problem(where, f"unknown key{_hint(key, known)}")


def _hint(word: str, choices: Any) -> str:
    import difflib  # only a task file with a problem pays for it

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {json.dumps(close[0])}?)" if close else ""


def _is_list_of_str(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
