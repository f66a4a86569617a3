"""A budget (`budget` for the whole file, `expect.budget` for a task, which overrides the file's key by key): what a
trial may spend and still pass, in tokens, tool calls and latency, and how often it may make the same call in a row."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from harness.records import DEFAULT_MAX_REPEATS, Budget
from harness.taskfile.context import Context
from harness.text import LARGEST, kind

BUDGET_KEYS = ("maxTokens", "maxToolCalls", "maxCallsPerTool", "maxLatencyMs", "maxRepeats", "blocking")
SHAPE = '{"maxTokens": N, "maxToolCalls": N, "maxCallsPerTool": {TOOL: N}, "maxLatencyMs": MS, ...}'


def budget_keys(context: Context, value: Any, path: str) -> dict[str, Any] | None:
    """The budget at path as written, every key checked; None and the problems when one is wrong."""
    if not isinstance(value, dict):
        context.problem(path, f"expected {SHAPE}, got {kind(value)}")
        return None
    problems = len(context.problems)
    context.unknown_keys(value, BUDGET_KEYS, path)
    for key in ("maxTokens", "maxToolCalls"):
        if key in value:
            _count(context, value[key], f"{path}.{key}")
    if value.get("maxRepeats") is not None and not _whole(value["maxRepeats"], 2):
        context.problem(
            f"{path}.maxRepeats",
            "expected a whole number from 2 to 2^53 (this many steps in a row with the same calls and results are a"
            f" loop), or null to check no loop, got {_shown(value['maxRepeats'])}",
        )
    if "maxLatencyMs" in value:
        latency = value["maxLatencyMs"]
        number = isinstance(latency, (int, float)) and not isinstance(latency, bool)
        if not number or not 0 < latency <= LARGEST:
            context.problem(
                f"{path}.maxLatencyMs", f"expected milliseconds, more than 0 and at most 2^53, got {_shown(latency)}"
            )
    if "maxCallsPerTool" in value:
        _per_tool(context, value["maxCallsPerTool"], f"{path}.maxCallsPerTool")
    if "blocking" in value and not isinstance(value["blocking"], bool):
        context.problem(f"{path}.blocking", f"expected true or false, got {kind(value['blocking'])}")
    return value if len(context.problems) == problems else None


def effective_budget(shared: Mapping[str, Any] | None, own: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A task's budget as written: its own keys over the file's; None when neither gives one."""
    if shared is None and own is None:
        return None
    return {**(shared or {}), **(own or {})}


def make_budget(keys: Mapping[str, Any]) -> Budget:
    """The budget a checked one says."""
    return Budget(
        max_tokens=keys.get("maxTokens"),
        max_tool_calls=keys.get("maxToolCalls"),
        max_calls_per_tool=keys.get("maxCallsPerTool", {}),
        max_latency_ms=keys.get("maxLatencyMs"),
        max_repeats=keys.get("maxRepeats", DEFAULT_MAX_REPEATS),
        blocking=keys.get("blocking", False),
    )


def _per_tool(context: Context, value: Any, path: str) -> None:
    if not isinstance(value, dict):
        context.problem(path, f"expected an object of tool names to the calls each may have, got {kind(value)}")
        return
    for name, limit in value.items():
        context.unlisted(name, f"{path}.{name}")
        _count(context, limit, f"{path}.{name}")


def _count(context: Context, value: Any, path: str) -> None:
    if not _whole(value, 1):
        context.problem(path, f"expected a whole number from 1 to 2^53, got {_shown(value)}")


def _whole(value: Any, least: int) -> bool:
    """A whole number from least to what the results file keeps, so that a baseline reads back the budget it wrote."""
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= LARGEST


def _shown(value: Any) -> str:
    """A number as written (`0`, `2.5`), anything else as its kind."""
    number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return json.dumps(value) if number else kind(value)
