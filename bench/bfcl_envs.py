"""A tool environment over the Berkeley Function Calling Leaderboard's own multi-turn classes (a file system, messaging,
a trading bot, travel booking, a vehicle...), for the tasks bench/bfcl_multiturn.py ports.

BFCL's code is not copied: it is imported from the bfcl-eval wheel, read in place (the wheel named by BFCL_WHEEL is put
on sys.path), or from an installed bfcl_eval. BfclWorld holds one instance of each class a task involves, made and
loaded as BFCL's checker makes them, and has every public method of every class: a call runs the method of that name on
the instance of the class that has it, and returns what BFCL's executor would show the model (a string as it is, a dict
as JSON, anything else as str()). state() is the public attributes of each instance as JSON, so that two states are
equal exactly when BFCL's state check finds no difference between the instances.
"""

from __future__ import annotations

import copy
import importlib
import importlib.resources
import json
import os
import sys
from collections.abc import Callable
from typing import Any

if os.environ.get("BFCL_WHEEL"):
    sys.path.insert(0, os.environ["BFCL_WHEEL"])

from bfcl_eval.constants.executable_backend_config import (  # type: ignore[import-not-found]
    CLASS_FILE_PATH_MAPPING,
    MULTI_TURN_FUNC_DOC_FILE_MAPPING,
    STATELESS_CLASSES,
)

# The classes of BFCL's four multi-turn categories (the memory and web search classes belong to its agentic ones).
CLASSES = (
    "GorillaFileSystem", "MathAPI", "MessageAPI", "TwitterAPI",
    "TicketAPI", "TradingBot", "TravelAPI", "VehicleControlAPI",
)  # fmt: skip


def bfcl_class(name: str) -> type:
    """One of BFCL's classes, from its own module."""
    return getattr(importlib.import_module(CLASS_FILE_PATH_MAPPING[name]), name)  # type: ignore[no-any-return]


def data_lines(name: str) -> list[dict[str, Any]]:
    """A JSON-lines file of BFCL's data, from the wheel or an installed bfcl_eval."""
    text = importlib.resources.files("bfcl_eval").joinpath(f"data/{name}").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def function_docs(name: str) -> list[dict[str, Any]]:
    """BFCL's function docs of one class: one per public method, the tools a model is given."""
    return data_lines(f"multi_turn_func_doc/{MULTI_TURN_FUNC_DOC_FILE_MAPPING[name]}")


# Read from the docs, so that a class is imported only when a task involves it (MathAPI's module needs mpmath).
OWNER = {doc["name"]: name for name in CLASSES for doc in function_docs(name)}  # no two classes share a method name


def as_bfcl_shows(result: Any) -> str:
    """A method's return value as BFCL's executor turns it into the text the model reads."""
    if type(result) is str:
        return result
    if type(result) is dict:
        try:
            return json.dumps(result)
        except (TypeError, ValueError):
            return str(result)
    return str(result)


def as_json(value: Any) -> Any:
    """An attribute's value as JSON that is equal for two values exactly when BFCL's != finds them equal."""
    kind = type(value).__name__
    if kind == "File":  # gorilla_file_system.File compares name and content
        return {"file": value.name, "content": value.content}
    if kind == "Directory":  # Directory compares name and contents, never its parent
        return {"directory": value.name, "contents": as_json(value.contents)}
    if isinstance(value, dict):
        return {str(key): as_json(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted(as_json(item) for item in value)
    if value is None or isinstance(value, (str, int, float)):
        return value
    raise TypeError(f"no JSON form for a {kind} in BFCL's state")


class BfclWorld:
    """The instances of the BFCL classes one task involves, loaded with its initial config, as one environment."""

    def __init__(self, classes: list[str], scenario: dict[str, Any], long_context: bool = False) -> None:
        self.instances: dict[str, Any] = {}
        for name in classes:
            instance = bfcl_class(name)()
            if name not in STATELESS_CLASSES:
                instance._load_scenario(copy.deepcopy(scenario.get(name, {})), long_context=long_context)
            self.instances[name] = instance

    def state(self) -> dict[str, Any]:
        """Each instance's public attributes as JSON, by class: what BFCL's state check compares."""
        return {
            name: {key: as_json(value) for key, value in vars(instance).items() if not key.startswith("_")}
            for name, instance in self.instances.items()
        }


def _method(method: str) -> Callable[..., str]:
    def call(self: BfclWorld, **args: Any) -> str:
        owner = self.instances.get(OWNER[method])
        if owner is None:
            raise AttributeError(f"{method} belongs to {OWNER[method]}, which this task does not involve")
        return as_bfcl_shows(getattr(owner, method)(**args))

    call.__name__ = call.__qualname__ = method
    call.__doc__ = f"{OWNER[method]}.{method}, as BFCL's executor runs it."
    return call


for _name in OWNER:
    setattr(BfclWorld, _name, _method(_name))
