"""What the checks of one task file share: the problems found so far, the environment its ${VAR} placeholders
read, and the file's tools and settings that later parts are checked against."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from harness.records import InputSchema, Tool
from harness.settings import CANARY
from harness.text import count, kind, lone_surrogate

# The patterns of placeholders are compiled (and cached by re) by the first file that has a `$`, not by every run.
# `$$` is a dollar, `${NAME}` a placeholder; any other `${` (unclosed, empty, a bad name) is a problem, never sent.
PLACEHOLDER = r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$\{[^}\s]*\}?"
# Forbidden text is expanded where it is read: a canary's variable may be unset, which skips the check, not the run.
FORBIDDEN_TEXT_ENTRY = r"\.expect\.forbiddenText\[\d+\]\Z"
TASK_PATH = r"tasks\[\d+\]\Z"
UNEXPANDED = ("comment", "quarantine")  # a task's keys whose text is never expanded
NOTHING: dict[str, Any] = {}  # shared by every task with no scripted results or argument values; never changed


class Context:
    """One task file's check: every problem with its JSON path, the environment, and the file's tools and settings."""

    def __init__(self, environ: Mapping[str, str], folder: str = ".") -> None:
        self.environ = environ
        self.folder = folder  # the task file's, against which an environment's module file is found
        self.problems: list[str] = []
        self.skipped: dict[str, list[str]] = {}  # an unset variable -> the tasks whose forbiddenText check it skips
        self.cautions: list[str] = []  # what loads but is likely not what the author meant, with its JSON path
        self.variables: set[str] = set()  # every variable a placeholder names
        self.expanded: dict[str, None] = {}  # the variables placeholders were expanded from, outside forbiddenText
        self.tools: dict[str, Tool] = {}  # the file's sound tools by name
        # Tools already reported as broken: tasks naming them get no second, cascading problem.
        self.broken_tools: set[str] = set()
        self.tools_unreadable = False
        self.tool_paths: dict[str, str] = {}  # a tool's name -> its JSON path, for problems found in its schema later
        self.schemas: dict[str, InputSchema | None] = {}  # compiled once per tool, None when it cannot be checked
        self.check_args = "keys"  # the file's checkArgs: every task's, unless its expect says otherwise

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    def warn(self, path: str, message: str) -> None:
        """A warning at path: the file loads, and validate and the run say it."""
        self.cautions.append(f"{path}: {message}")

    def text(self, obj: dict[str, Any], key: str, path: str) -> str | None:
        """The non-empty string at obj[key], or None and a problem."""
        value = obj.get(key)
        if isinstance(value, str) and value.strip():
            return value
        where = f"{path}.{key}" if path else key
        if key not in obj:
            self.problem(where, "missing: expected a non-empty string")
        else:
            self.problem(where, f"expected a non-empty string, got {kind(value)}")
        return None

    def unknown_keys(self, obj: dict[str, Any], known: tuple[str, ...], path: str) -> None:
        for key in obj:
            if key not in known:
                where = f"{path}.{key}" if path else key
                self.problem(where, f"unknown key{hint(key, known)}")

    def unlisted(self, name: str, path: str) -> None:
        """A problem at path for a name no tool has, unless the tools could not be read or that one was reported."""
        if name not in self.tools and not self.tools_unreadable and name not in self.broken_tools:
            self.problem(path, f"{json.dumps(name)} is not in tools{hint(name, self.tools)}")

    def expand(self, value: Any, path: str) -> Any:
        """${VAR} in every string from the environment, $$ for a dollar; an unset variable is a problem at its path."""
        if isinstance(value, str):
            if "$" not in value or re.search(FORBIDDEN_TEXT_ENTRY, path):  # what has no `$` has no placeholder
                return value
            expanded, unset = self.substitute(value, path)
            for name in unset:
                self.problem(path or "top level", f"${{{name}}} is not set in the environment")
            return expanded
        if isinstance(value, list):
            return [self.expand(item, f"{path}[{i}]") for i, item in enumerate(value)]
        if isinstance(value, dict):
            return {
                # A comment is for the author and a quarantine for the gate, neither ever sent: they stay as written.
                key: item
                if key in UNEXPANDED and re.match(TASK_PATH, path)
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
            if not re.search(FORBIDDEN_TEXT_ENTRY, path):
                self.expanded[name] = None
            return value

        return re.sub(PLACEHOLDER, substitute, text), unset

    def warnings(self) -> tuple[str, ...]:
        """A line per unset variable that skipped forbiddenText checks, one for a canary set that no placeholder of the
        file names, then each warning at its path."""
        unchecked = f"{CANARY} is set, but the task file has no ${{{CANARY}}}: no reply is checked for the canary"
        return (
            *(
                f"{name} is not set: {count(len(ids), 'forbiddenText check')} skipped ({', '.join(ids)})"
                for name, ids in self.skipped.items()
            ),
            *((unchecked,) if self.environ.get(CANARY) and CANARY not in self.variables else ()),
            *self.cautions,
        )


def hint(word: str, choices: Any) -> str:
    import difflib  # only a task file with a problem pays for it

    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {json.dumps(close[0])}?)" if close else ""


def is_list_of_str(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)
