"""`eval_agent.py import evalbench FILE`: another harness's evalset printed as a task file, with every field it cannot
carry over said, and kept in the task's comment."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Sequence
from typing import Any

from harness.files import read_input
from harness.flags import Parser
from harness.records import ConfigError
from harness.reporters.console import say
from harness.taskfile import FORMAT_VERSION, MAX_BYTES, SLUG
from harness.text import count, kind, printable

# evalbench's agent format: what each scenario field becomes here.
MAPPED = ("id", "starting_prompt", "expected_trajectory", "kind")
KEPT = ("conversation_plan", "env", "max_turns")  # kept in the comment: no deterministic form here
UNCHECKED = ("expected_skills", "binary_rubric")  # judged by an LLM or the agent's own logs there: not checked here
# A `$` that starts no ${NAME} placeholder is written `$$`, so that the task file reads it back as it was.
DOLLAR = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}|\$")
PLACEHOLDER = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def main(argv: Sequence[str]) -> int:
    """Print the task file; say on stderr what the author still has to do."""
    parser = Parser(
        prog="eval_agent.py import",
        description="Print a task file made from another harness's evalset. Formats: evalbench (its agent format: "
        "scenarios with starting_prompt and expected_trajectory).",
        epilog="Exit codes: 0 printed, 2 an unreadable file or one that is not an evalset of that format.",
    )
    parser.add_argument("format", choices=["evalbench"], help="the evalset's format")
    parser.add_argument("file", metavar="FILE", help="the evalset")
    args = parser.parse_args(argv)
    task_file, notes = from_evalbench(_read_json(args.file), args.file)
    for line in json.dumps(task_file, indent=2, ensure_ascii=False).splitlines():
        say(line)
    for note in notes:
        print(printable(f"eval_agent import: {note}"), file=sys.stderr)
    return 0


def _read_json(path: str) -> Any:
    raw = read_input(path, MAX_BYTES, f"over the {MAX_BYTES} bytes an evalset may have")
    try:
        return json.loads(raw.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{path}: JSON nested too deeply to read") from None
    except ValueError:  # what int() refuses: more digits than sys.get_int_max_str_digits()
        raise ConfigError(f"{path}: an integer too long to read as a number") from None


def from_evalbench(data: Any, path: str) -> tuple[dict[str, Any], list[str]]:
    """An evalbench agent evalset as a task file, and notes: what the author must do, and what was not carried over.

    starting_prompt becomes the prompt; expected_trajectory (`<server>__<tool>` names) an in-order trajectory; kind
    the category; conversation_plan, env and max_turns the task's comment, with the task marked to get its turns.
    """
    if not isinstance(data, dict) or not isinstance(data.get("scenarios"), list):
        raise ConfigError(f"{path}: not an evalbench evalset: expected an object with a list of scenarios")
    notes = [f"top level: {key}: unknown field, left out" for key in data if key != "scenarios"]
    tasks: list[dict[str, Any]] = []
    tools: dict[str, None] = {}
    variables: dict[str, None] = {}
    for index, scenario in enumerate(data["scenarios"]):
        where = f"scenarios[{index}]"
        if not isinstance(scenario, dict):
            raise ConfigError(f"{path}: {where}: expected a scenario object, got {kind(scenario)}")
        prompt = scenario.get("starting_prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            raise ConfigError(f"{path}: {where}.starting_prompt: expected a non-empty string, got {kind(prompt)}")
        task_id = _slug(scenario.get("id"), index)
        if any(task["id"] == task_id for task in tasks):
            task_id = f"{task_id}-{index + 1}"
        trajectory = scenario.get("expected_trajectory")
        if not isinstance(trajectory, list) or not trajectory or not all(isinstance(n, str) and n for n in trajectory):
            notes.append(f"{where} ({task_id}): no expected_trajectory of tool names: nothing to check, left out")
            continue
        comment: dict[str, Any] = {"importedFrom": f"evalbench {where}"}
        if scenario.get("id") != task_id:
            comment["evalbenchId"] = scenario.get("id")
        for key in (*KEPT, *UNCHECKED):
            if key in scenario:
                comment[_camel(key)] = scenario[key]
        unknown = [key for key in scenario if key not in (*MAPPED, *KEPT, *UNCHECKED)]
        for key in unknown:
            comment[key] = scenario[key]
            notes.append(f"{where}.{key}: unknown field, kept in the comment of {task_id}")
        unchecked = [key for key in UNCHECKED if key in scenario]
        if unchecked:
            notes.append(
                f"{where}: {', '.join(unchecked)}: not checked by this harness, kept in the comment of {task_id}"
            )
        if "conversation_plan" in scenario:
            comment["todo"] = "write the user's follow-ups from conversationPlan as turns"
            notes.append(f"{task_id}: a conversation plan cannot be played as it is: write its follow-ups as turns")
        category = scenario.get("kind")
        for text in (prompt, *_strings(scenario.get("env"))):
            variables.update(dict.fromkeys(PLACEHOLDER.findall(text)))
        tools.update(dict.fromkeys(trajectory))
        tasks.append(
            {
                "id": task_id,
                "category": category if isinstance(category, str) and category.strip() else "evalbench",
                "prompt": DOLLAR.sub(lambda m: m.group(0) if len(m.group(0)) > 1 else "$$", prompt),
                "expect": {"trajectory": list(trajectory), "order": "in-order"},
                "comment": comment,
            }
        )
    if not tasks:
        raise ConfigError(f"{path}: no scenario with a prompt and an expected trajectory: nothing to import")
    notes.insert(0, f"{count(len(tasks), 'task')} from {path}")
    notes.append(
        f"tools: {count(len(tools), 'tool')} by name only: paste the real surface from `eval_agent.py tools`, "
        "so that arguments can be checked"
    )
    if variables:
        notes.append(f"set before running: {', '.join(variables)} (placeholders in the prompts, or in env)")
    description = "imported from evalbench by name: replace with the tool's real description and inputSchema"
    task_file = {
        "version": FORMAT_VERSION,
        "tools": [{"name": name, "description": description, "inputSchema": {"type": "object"}} for name in tools],
        "tasks": tasks,
    }
    return task_file, notes


def _slug(value: Any, index: int) -> str:
    if isinstance(value, str) and SLUG.match(value):
        return value
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", value).strip("-._") if isinstance(value, str) else ""
    return text if text and SLUG.match(text) else f"scenario-{index + 1}"


def _camel(key: str) -> str:
    head, *rest = key.split("_")
    return head + "".join(word.title() for word in rest)


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [text for item in value.values() for text in _strings(item)]
    if isinstance(value, list):
        return [text for item in value for text in _strings(item)]
    return []
