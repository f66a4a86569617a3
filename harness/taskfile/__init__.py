"""Load a task file (format version 1): read it, parse it, and check it whole before any request is sent, every
problem at its JSON path.

The checks are split by the part of the file they read: tasks (the top level and each task, and its hash), tools (the
surface the agent is given), conversations (turns, scripted tool results), expectations (what a task expects and
forbids) and argchecks (argValues, checkArgs), sharing a context (the problems, the environment for ${VAR}, the tools).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from functools import partial
from typing import Any

from harness.files import read_input
from harness.records import ConfigError, TaskFile
from harness.taskfile.context import Context
from harness.taskfile.tasks import FORMAT_VERSION, SLUG, canonical_sha256, check_task_file
from harness.text import lone_surrogate, sha256_hex

# A \uD800-\uDFFF escape in the text: the only way a task file's JSON can hold a lone surrogate, which is no Unicode.
# Compiled (and cached by re) by the first file with a backslash, not by every run.
SURROGATE_ESCAPE = r"\\[uU][dD][89a-fA-F]"
MAX_BYTES = 64 * 1024 * 1024
MAX_BYTES_VAR = "EVAL_MAX_TASK_FILE_BYTES"
__all__ = [
    "FORMAT_VERSION",
    "MAX_BYTES",
    "MAX_BYTES_VAR",
    "SLUG",
    "canonical_sha256",
    "load_task_file",
    "parse_task_file",
    "read_task_file",
]


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
    over = f"over the {max_bytes} bytes a task file may have ({MAX_BYTES_VAR})"
    return read_input(path, max_bytes, over, "cannot read the task file")


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
    context = Context(environ, os.path.dirname(path))
    if repeated or ("\\" in text and re.search(SURROGATE_ESCAPE, text)):
        _inspect(context, data, "")
        if context.problems:  # later checks could not trust what they would read
            return None, context.problems
    placeholders = "$" in text
    del text  # a large file's text need not stay beside what it parsed to
    if placeholders:  # most task files have no placeholder: skip the walk (and the copy it makes)
        data = context.expand(data, "")
    tools, tasks = check_task_file(context, data)
    if context.problems:
        return None, context.problems
    task_file = TaskFile(
        path=path,
        sha256=digest,
        tools=tools,
        tasks=tasks,
        tools_sha256=canonical_sha256(data["tools"]),
        system=data.get("system"),
        warnings=context.warnings(),
        variables=frozenset(context.variables),
        expanded=tuple(context.expanded),
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


def _inspect(context: Context, value: Any, path: str) -> None:
    """Keys given twice, lone surrogates and overlong integers, at their JSON paths: what a JSON parser lets through,
    or what it cannot convert."""
    if isinstance(value, _LongInteger):
        context.problem(
            path or "top level", f"an integer of {len(value.lstrip('-'))} digits, too long to read as a number"
        )
    elif isinstance(value, str):
        lone = lone_surrogate(value)
        if lone is not None:
            context.problem(path or "top level", f"not Unicode text: a lone surrogate ({lone})")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            _inspect(context, item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key in getattr(value, "repeated", ()):
            context.problem(
                path or "top level", f"{json.dumps(key)} is given twice; a JSON reader keeps only one of them"
            )
        for key, item in value.items():
            _inspect(context, key, f"{path}.{key!r}" if path else repr(key))
            _inspect(context, item, f"{path}.{key}" if path else key)
