"""An agent that runs its own tools, served the task's tools by the run's tool server: a turn's calls as the server saw
them are the truth, and the calls the agent reports are checked against them.

Loaded only by a trial its run serves tools to (harness/serving holds the server itself).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from harness.records import Reply, Served, Step, Task, ToolCall, ToolResult, replace
from harness.schema import json_equal
from harness.scoring import repeated_steps
from harness.text import call_text, clip

if TYPE_CHECKING:
    from harness.serving.tools import ServedTurn

UNOBSERVED = "tool:unobserved"
SHOWN = 200  # characters of the first unobserved call a reason quotes


def served_turn(served: Served, task: Task, turn: int, answer: Callable[[ToolCall], ToolResult]) -> ServedTurn:
    """A new endpoint for the turn (1 is the prompt), serving the tools the agent has then."""
    names = task.offered[turn - 1] if task.offered else served.tools
    return served.server.serve([served.tools[name] for name in names], answer, turn, served.names)


def called(endpoint: ServedTurn) -> Callable[[], bool]:
    """Whether the agent has called the endpoint's tools yet."""
    return lambda: bool(endpoint.calls())


def secret_paths(endpoint: ServedTurn) -> tuple[str, str]:
    """The endpoint's paths, the only key to its tools: never written."""
    return urlsplit(endpoint.url).path, urlsplit(endpoint.call_url).path


def observed_step(reply: Reply, endpoint: ServedTurn, served: Served, repeats: int | None, turn: int) -> Step:
    """The turn's one step: the reply with the calls the server answered in its place, in order, each with its result;
    an error when the environment failed, or when the reply reports a call of a served tool the server never answered
    (tool:unobserved); an answered call the reply leaves out is kept, marked unreported; a call of the agent's own tools
    (none of the task file's) is kept after them, as reported. The loop rule reads each
    answered call as a step of its own: the agent's own steps are not seen."""
    if endpoint.bug is not None:
        raise endpoint.bug  # the harness's own, not the agent's: the boundary's exit 4
    results = [call.result for call in endpoint.calls()]
    unreported = list(range(len(results)))
    unobserved: ToolCall | None = None
    own: list[ToolCall] = []
    for call in reply.tool_calls:
        if call.name not in served.tools:
            own.append(call)  # one of the agent's own tools: not served, judged as reported (a refusal that made one)
            continue
        alike = [i for i in unreported if results[i].call.name == call.name]
        same = next((i for i in alike if json_equal(results[i].call.args, call.args)), alike[0] if alike else None)
        if same is None:
            unobserved = unobserved or call
        else:
            unreported.remove(same)
    played = tuple(replace(result, unreported=True) if i in unreported else result for i, result in enumerate(results))
    judged = replace(reply, tool_calls=(*(result.call for result in played), *own))
    if endpoint.failure is not None:
        judged = replace(judged, error_code=endpoint.failure.code, error=str(endpoint.failure))
    elif unobserved is not None and judged.error_code is None:
        made = clip(call_text(unobserved.name, unobserved.args, values=True), SHOWN)
        judged = replace(
            judged,
            error_code=UNOBSERVED,
            error=f"the reply reports {made}, which the tool server never answered: the agent did not use the "
            "served tools",
        )
    if repeats is not None and judged.error_code is None:
        judged = replace(judged, loop=_loop(played, repeats, turn))
    return Step(judged, played)


def _loop(results: Sequence[ToolResult], repeats: int, turn: int) -> str | None:
    """Why the answered calls loop: `repeats` in a row alike, with the same results; None when they do not."""
    steps = [Step(Reply(), (result,)) for result in results]
    ends = range(repeats, len(steps) + 1)
    return next(filter(None, (repeated_steps(steps[end - repeats : end], repeats, turn) for end in ends)), None)
