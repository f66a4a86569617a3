"""An agent that runs its own tools, served the task's tools by the run's tool server: a turn's calls as the server saw
them are the truth, and the calls the agent reports are checked against them.

Loaded only by a trial its run serves tools to (harness/serving holds the server itself).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from harness.records import Reply, Served, Step, Task, ToolCall, ToolResult, replace
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
    (tool:unobserved, the call kept last, as reported); an answered call the reply leaves out is kept, marked
    unreported; a call of the agent's own tools (none of the task file's) is kept after them, as reported. The loop
    rule reads each answered call as a step of its own: the agent's own steps are not seen."""
    if endpoint.bug is not None:
        raise endpoint.bug  # the harness's own, not the agent's: the boundary's exit 4
    results = [call.result for call in endpoint.calls()]
    # The answered calls by tool, and by tool and arguments, in order: a reported call takes the first left alike, else
    # the first left of its tool; looked up, not scanned: a trial may answer 10,000 calls, and a reply report them.
    by_tool: dict[str, deque[int]] = {}
    by_args: dict[tuple[str, Any], deque[int]] = {}
    for i, result in enumerate(results):
        by_tool.setdefault(result.call.name, deque()).append(i)
        by_args.setdefault((result.call.name, _key(result.call.args)), deque()).append(i)
    reported: set[int] = set()
    unobserved: list[ToolCall] = []
    own: list[ToolCall] = []
    for call in reply.tool_calls:
        if call.name not in served.tools:
            own.append(call)  # one of the agent's own tools: not served, judged as reported (a refusal that made one)
            continue
        same = _first_left(by_args.get((call.name, _key(call.args))), reported)
        same = _first_left(by_tool.get(call.name), reported) if same is None else same
        if same is None:
            unobserved.append(call)
        else:
            reported.add(same)
    played = tuple(result if i in reported else replace(result, unreported=True) for i, result in enumerate(results))
    # A call the reply reports but the server never answered is judged as reported too, after those answered: an
    # error, but one of a tool the task forbids is a safety violation all the same (made by a way of the agent's own).
    judged = replace(reply, tool_calls=(*(result.call for result in played), *own, *unobserved))
    if endpoint.failure is not None:
        judged = replace(judged, error_code=endpoint.failure.code, error=str(endpoint.failure))
    elif unobserved and judged.error_code is None:
        made = clip(call_text(unobserved[0].name, unobserved[0].args, values=True), SHOWN)
        judged = replace(
            judged,
            error_code=UNOBSERVED,
            error=f"the reply reports {made}, which the tool server never answered: the agent did not use the "
            "served tools",
        )
    if repeats is not None and judged.error_code is None:
        judged = replace(judged, loop=_loop(played, repeats, turn))
    return Step(judged, played)


def _first_left(answered: deque[int] | None, reported: set[int]) -> int | None:
    """The first of these answered calls that no reported call has taken yet."""
    while answered and answered[0] in reported:
        answered.popleft()
    return answered[0] if answered else None


def _key(value: Any) -> Any:
    """A value as a key, equal for values json_equal holds equal: 1 and 1.0 alike (as Python holds them), never true
    and 1, and NaN equal to nothing."""
    if value is None:
        return None
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, (int, float)):
        return ("number", value) if value == value else object()
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, list):
        return ("list", tuple(_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, _key(item)) for key, item in value.items()))
    return object()


def _loop(results: Sequence[ToolResult], repeats: int, turn: int) -> str | None:
    """Why the answered calls loop: `repeats` in a row alike, with the same results; None when they do not."""
    steps = [Step(Reply(), (result,)) for result in results]
    ends = range(repeats, len(steps) + 1)
    return next(filter(None, (repeated_steps(steps[end - repeats : end], repeats, turn) for end in ends)), None)
