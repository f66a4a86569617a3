"""A tool environment in a task file (`environment`, for the file or one task): the user's Python class whose fresh
instance answers, per trial, the calls of the tools it implements.

Only what can be checked without running the user's code is checked here (a module file that is not there, a
method map naming no tool); its module, class and methods are checked in a worker when the run starts.
"""

from __future__ import annotations

import json
import os
from typing import Any

from harness.records import DEFAULT_ENVIRONMENT_TIMEOUT, Environment
from harness.taskfile.context import Context
from harness.text import kind

ENVIRONMENT_KEYS = ("module", "class", "config", "methods", "timeout")
MAX_TIMEOUT = 600  # seconds


def environment(context: Context, value: Any, path: str) -> Environment | None:
    """The environment at path, or None and the problems."""
    if not isinstance(value, dict):
        context.problem(path, f'expected {{"module": FILE_OR_NAME, "class": NAME, ...}}, got {kind(value)}')
        return None
    problems = len(context.problems)
    context.unknown_keys(value, ENVIRONMENT_KEYS, path)
    module = context.text(value, "module", path)
    if module is not None and module.endswith(".py"):
        found = os.path.join(context.folder, module)
        if not os.path.isfile(found):
            context.problem(
                f"{path}.module", f"no file {json.dumps(module)} (a path is read from the task file's folder)"
            )
        module = os.path.abspath(found)
    elif module is not None and not all(part.isidentifier() for part in module.split(".")):
        context.problem(f"{path}.module", f"expected a .py file or a module's name, got {json.dumps(module)}")
    class_name = context.text(value, "class", path)
    if class_name is not None and not class_name.isidentifier():
        context.problem(f"{path}.class", f"expected a class's name, got {json.dumps(class_name)}")
    config = value.get("config", {})
    if not isinstance(config, dict):
        context.problem(f"{path}.config", f"expected an object: the instance's keyword arguments, got {kind(config)}")
    named = value.get("methods", {})
    if not isinstance(named, dict):
        context.problem(f"{path}.methods", f"expected an object of tool names to method names, got {kind(named)}")
        named = {}
    for tool, method in named.items():
        context.unlisted(tool, f"{path}.methods.{tool}")
        if not isinstance(method, str) or not method.isidentifier() or method.startswith("_"):
            context.problem(f"{path}.methods.{tool}", f"expected a public method's name, got {kind(method)}")
    timeout = value.get("timeout", DEFAULT_ENVIRONMENT_TIMEOUT)
    number = isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
    if not number or not 0 < timeout <= MAX_TIMEOUT:
        got = json.dumps(timeout) if number else kind(timeout)
        context.problem(f"{path}.timeout", f"expected seconds, more than 0 and at most {MAX_TIMEOUT}, got {got}")
    if len(context.problems) != problems or module is None or class_name is None:
        return None
    return Environment(
        module=module,
        class_name=class_name,
        config=config,
        methods={tool: named.get(tool, tool.rsplit(".", 1)[-1]) for tool in context.tools},
        named=tuple(named),
        timeout=float(timeout),
        where=path,
    )
