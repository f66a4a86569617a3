"""A task as a conversation: what the agent receives at each step, the tool results the harness plays back, and the
whole trial taken together for scoring."""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from harness.exchanges import Place, at, served_by
from harness.records import (
    NO_BUDGET,
    AgentRequest,
    Backend,
    BackendError,
    EndState,
    Reply,
    ResultSource,
    Served,
    Step,
    Task,
    ToolCall,
    ToolResult,
    ToolScript,
    Turn,
    WorldError,
    replace,
)
from harness.scoring import call_problem, repeated_steps
from harness.text import CALL_SIGN, provider_name

if TYPE_CHECKING:
    from harness.environments import World

UNSCRIPTED = "no result scripted for {name}"
INJECTED = "503 Service Unavailable (injected)"  # what a failFirst call answers: a transient failure, worth a retry
FAILED = -1  # where the player counts a tool's injected failures, beside its cases' counts
# A trial's and a conversation's ids: os.urandom's, drawn a batch at a time rather than with a system call per trial,
# which lets go of the interpreter lock: at a concurrency of 4 each release hands it to another worker, and the trial
# then waits to take it back.
ID_BATCH = 256
_ids: Iterator[str] = iter(())


def agent_request(
    task: Task,
    conversation_id: str = "",
    history: Sequence[Turn] = (),
    steps: Sequence[Step] = (),
    trial_id: str = "",
    trial: int = 1,
) -> AgentRequest:
    """What the agent receives at one step: the task's id, the newest user message, the conversation so far and which
    trial this is.

    Never anything of the task's expectation. The tools it has now, for a task that narrows or adds them.
    """
    prompt = task.turns[len(history) - 1] if history else task.prompt
    tools = task.offered[len(history)] if task.offered else None
    return AgentRequest(task.id, prompt, conversation_id, tuple(history), tuple(steps), tools, trial_id, trial)


class ToolPlayer:
    """Plays a task's scripted tool results back for one trial, counting the calls each case and default answered; a
    tool with no script that the trial's world implements is answered by the world."""

    def __init__(self, scripts: Mapping[str, ToolScript], world: World | None = None) -> None:
        self.scripts = scripts
        self.world = world
        # (tool, case index or None for the rest) -> calls; a dict: every trial makes one, and a Counter costs more
        self.calls: dict[tuple[str, int | None], int] = {}

    def play(self, calls: Sequence[ToolCall]) -> tuple[ToolResult, ...]:
        """A result per call, in order: from its tool's first matching case, else its default, else the fixed text."""
        return tuple(self.answer(call) for call in calls)

    def answer(self, call: ToolCall) -> ToolResult:
        """The result for one call, and where it came from: a script wins for its tool; a call no case of it matches,
        with no default, goes to the world as a call of a tool with no script does."""
        script = self.scripts.get(call.name)
        if script is not None:
            if script.fail_first and self.calls.get((call.name, FAILED), 0) < script.fail_first:
                self.calls[call.name, FAILED] = self.calls.get((call.name, FAILED), 0) + 1
                return ToolResult(call, {"error": INJECTED}, "injected")
            for index, case in enumerate(script.cases):
                if call_problem(case.when, call) is None:
                    return self._next(call, case.results, "case", index)
            if script.cases and script.results:
                return self._next(call, script.results, "default")
            if script.results:
                return self._next(call, script.results, "script" if len(script.results) == 1 else "sequence")
        if self.world is not None and self.world.implements(call.name):
            return self.world.call(call)
        return ToolResult(call, UNSCRIPTED.format(name=call.name), "unscripted")

    def _next(
        self, call: ToolCall, results: Sequence[Any], source: ResultSource, case: int | None = None
    ) -> ToolResult:
        """The next of these results for the call (the last repeating), with the call's echoes filled in."""
        number = self.calls.get((call.name, case), 0)
        self.calls[call.name, case] = number + 1
        return ToolResult(call, echoed(results[min(number, len(results) - 1)], call.args), source, case)


def echoed(result: Any, args: Mapping[str, Any]) -> Any:
    """The result with every {"echo": KEY} replaced by the call's argument KEY (null when the call left it out)."""
    if isinstance(result, list):
        return [echoed(item, args) for item in result]
    if isinstance(result, dict):
        if list(result) == ["echo"] and isinstance(result["echo"], str):
            return args.get(result["echo"])
        return {key: echoed(item, args) for key, item in result.items()}
    return result


def converse(
    backend: Backend,
    task: Task,
    tools: Collection[str] = (),
    world: World | None = None,
    trial: int = 1,
    served: Served | None = None,
    endpoints: list[str] | None = None,
    model_proxy: str | None = None,
) -> tuple[tuple[Turn, ...], str]:
    """Send the task turn by turn, step by step; the conversation, and its id (empty for a single prompt).

    A backend that plays tools gets each reply's tool results and is asked again, up to the task's maxSteps in a turn;
    an error ends the conversation, as does a model still calling tools when its steps ran out. A reply that wrote a
    call as text instead of making it (tools: the task file's tool names) is an error, as is the trial's world
    failing. A turn that checks its state has the world's state taken when it ends, kept from the agent. Each request
    carries the trial's id, made here, and its number (which of the task's), and is placed for the run's cassette.
    An agent that runs its own tools, when the run serves them (served), is given a new tool server endpoint each turn
    (each added to endpoints), and what the server answered is the turn's step (harness/observed.py). An agent whose
    model calls the run proxies is told the base URL of the trial's path on the proxy (model_proxy) in each request.
    """
    conversation_id = unguessable_id()[:16] if task.turns else ""
    trial_id = unguessable_id()
    repeats = (task.budget or NO_BUDGET).max_repeats
    if served is not None:
        from harness import observed  # only a trial whose tools are served
    # The tool results to play back, to a backend that asks again with them or through the tool server: a trial that
    # does neither makes none.
    plays = served is not None or (backend.PLAYS_TOOLS and task.is_conversation)
    player = ToolPlayer(task.tool_results, world) if plays else None
    turns: list[Turn] = []  # the conversation so far, as the agent is sent it: without the states taken
    ends: dict[int, EndState] = {}  # by turn: the world's state when it ended, for the turns that check it
    for index, user in enumerate((task.prompt, *task.turns)):
        steps: list[Step] = []
        endpoint = observed.served_turn(served, task, index + 1, player.answer) if served and player else None
        while True:
            at(Place(task.id, trial, index + 1, len(steps) + 1))
            request = agent_request(task, conversation_id, turns, steps, trial_id, trial)
            if model_proxy is not None:
                request = replace(request, model_proxy=model_proxy)
            if endpoint is not None:
                request = replace(
                    request, tool_server=(endpoint.url, endpoint.call_url), tools_called=observed.called(endpoint)
                )
                served_by(endpoint)  # a cassette records the calls it answers, a replay plays them to it
                if endpoints is not None:
                    endpoints += observed.secret_paths(endpoint)
            try:
                reply = backend.run(request)
            except BackendError as err:
                reply = Reply.failed(err)
            reply = read_names(_checked(reply, tools), tools)
            if endpoint is not None and served is not None:
                served_by(None)
                endpoint.end()
                steps.append(observed.observed_step(reply, endpoint, served, repeats, index + 1))
                break
            if reply.error_code is not None or player is None or not reply.tool_calls:
                steps.append(Step(reply))
                break
            if len(steps) + 1 >= task.max_steps:
                steps.append(Step(replace(reply, looping=True)))
                break
            try:
                steps.append(Step(reply, player.play(reply.tool_calls)))
            except WorldError as err:
                steps.append(Step(replace(reply, error_code=err.code, error=str(err))))
                break
            loop = repeated_steps(steps, repeats, index + 1) if repeats is not None else None
            if loop is not None:  # asking again would get the same again: stopped here, not when maxSteps runs out
                steps[-1] = replace(steps[-1], reply=replace(reply, loop=loop))
                break
        if world is not None and task.turn_states and task.turn_states[index] and steps[-1].reply.error_code is None:
            try:
                ends[index] = EndState(world.state())
            except WorldError as err:
                steps[-1] = replace(steps[-1], reply=replace(steps[-1].reply, error_code=err.code, error=str(err)))
        turns.append(Turn(user, tuple(steps)))
        last = steps[-1].reply
        if last.error_code is not None or last.looping or last.loop is not None:
            break
    if ends:
        turns = [replace(turn, end=ends[index]) if index in ends else turn for index, turn in enumerate(turns)]
    return tuple(turns), conversation_id


def unguessable_id() -> str:
    """32 hex digits no one can guess from the ids made before it: 128 bits from the system's random source."""
    global _ids
    made = next(_ids, None)
    if made is None:  # a worker that finds the batch spent too draws one of its own: its ids are as good
        drawn = os.urandom(16 * ID_BATCH).hex()
        _ids = iter([drawn[start : start + 32] for start in range(0, len(drawn), 32)])
        made = next(_ids)
    return made


def read_names(reply: Reply, tools: Collection[str]) -> Reply:
    """The reply, each call of a name no tool has but one tool has as providers take it (an agent on a provider's API
    reports `imageman_asset_get` for `imageman.asset.get`) read as that tool, the name it reported kept beside it."""
    if not tools:
        return reply
    for call in reply.tool_calls:  # a loop, not all() over a generator: every reply of every trial is looked at
        if call.name not in tools:
            break
    else:
        return reply
    safe = _provider_names(frozenset(tools))
    calls = tuple(
        replace(call, name=safe[call.name], reported_name=call.name)
        if call.name not in tools and call.name in safe
        else call
        for call in reply.tool_calls
    )
    return replace(reply, tool_calls=calls)


@lru_cache(maxsize=4)  # a run's tools are one set: an agent that reports every call so pays for the table once
def _provider_names(tools: frozenset[str]) -> dict[str, str]:
    """Each tool by its name as providers take it: one tool per name, as the loader refuses two."""
    return {provider_name(tool): tool for tool in tools}


def _checked(reply: Reply, tools: Collection[str]) -> Reply:
    """The reply; or, when its text writes a tool call instead of making one, the error reply:tool-call-in-text."""
    if not reply.text or CALL_SIGN.search(reply.text) is None:
        return reply
    from harness.textcalls import checked  # a text with no sign of a call (most of them) is not read for one

    return checked(reply, tools)


def whole_reply(turns: Sequence[Turn]) -> Reply:
    """Every step of every turn as one reply: all calls in order (each marked with its turn), all text, the last
    reply's error and loop, the attempts and tokens summed (an error's too); refused only when no step called a tool."""
    if len(turns) == 1 and len(turns[0].steps) == 1:  # a single prompt's one reply: most trials
        return turns[0].steps[0].reply
    replies = [(number, step.reply) for number, turn in enumerate(turns, 1) for step in turn.steps]
    if len(replies) == 1:
        return replies[0][1]
    last = replies[-1][1]
    called = any(reply.tool_calls for _, reply in replies)
    texts = [reply.text for _, reply in replies if reply.text]
    usages = [reply.usage for _, reply in replies if reply.usage]
    return Reply(
        tool_calls=tuple(replace(call, turn=number) for number, reply in replies for call in reply.tool_calls),
        refused=last.refused and not called,
        text="\n".join(texts) if texts else None,
        error_code=last.error_code,
        error=last.error,
        attempts=sum(reply.attempts for _, reply in replies),
        usage=(sum(u[0] for u in usages), sum(u[1] for u in usages)) if usages else None,
        looping=last.looping,
        loop=last.loop,
        refused_by_provider=None if called else last.refused_by_provider,
        refusal_stated=last.refusal_stated and not called,
        said=last.said,
    )
