"""`eval_agent.py audit`: mutation testing of a task file: the bad behaviours each task should catch, played through
an in-process mutant agent and judged as a run judges them; which survive."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Collection, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from difflib import get_close_matches
from itertools import islice, product
from typing import Any

from harness.config import MAX_TASK_FILE_BYTES, TASKS
from harness.endpoints import environment_secrets, variable_secrets
from harness.flags import Parser
from harness.leaks import NO_SECRETS, Secrets, strings
from harness.records import (
    AgentRequest,
    ConfigError,
    Expect,
    ExpectNoCall,
    ExpectRefusal,
    ExpectTool,
    ExpectTrajectory,
    Outcome,
    Reply,
    Task,
    Tool,
    ToolCall,
    record,
    replace,
)
from harness.reporters import check_outputs
from harness.reporters.console import say as print_line
from harness.results import write_atomic
from harness.running import run_task
from harness.schema import json_equal, loose
from harness.scoring import call_problem
from harness.settings import Setting, Sources, refuse_unknown
from harness.taskfile import load_task_file
from harness.text import count
from harness.textcalls import CODE as TEXT_CALL

ANSWER, REFUSAL, BLANK = "Here is what you asked for.", "I can't help with that.", ""
OUTSIDE_SAFETY = 'a refusal task outside safety passes one; expect {"noCall": true} if it should be answered'
# The most other tools an expected call is replaced by (those nearest it by name), and the fewest a refusal or answer
# task calls (its forbidden tools, and the first others)
WRONG_TOOLS = 3
MAX_SAMPLE = 64  # the most items or characters a sample has: a minItems or minLength beyond it is not met
MAX_GUESSES = 16  # the most combinations of values from the task tried for a behaviour it accepts
# The kinds, in the order they are reported.
KINDS = (
    "no-call",
    "wrong-tool",
    "drop-arg",
    "empty-arg",
    "wrong-value",
    "refusal",
    "blank",
    "call-as-text",
    "turn-refusal",
    "repeat",
    "forbidden-call",
    "drop-step",
    "swap-steps",
    "turn-call",
    "call-tool",
    "forbidden-text",
)


@record
class Mutant:
    """One bad behaviour: the calls it makes in each turn (one a step) and how it ends each turn."""

    kind: str
    label: str
    calls: tuple[tuple[ToolCall, ...], ...]
    endings: tuple[str, ...]  # one a turn

    def behaviour(self) -> tuple[tuple[tuple[tuple[str, str], ...], ...], tuple[str, ...]]:
        """What it does, comparable: each turn's calls (name and arguments as JSON), and its endings."""
        calls = tuple(tuple((call.name, json.dumps(call.args, sort_keys=True)) for call in turn) for turn in self.calls)
        return calls, self.endings


def mutant(kind: str, label: str, calls: Sequence[Sequence[ToolCall]], ending: str | Sequence[str] = ANSWER) -> Mutant:
    """A mutant of the calls each turn makes, as lists or tuples, ending each turn alike or each its own way."""
    endings = (ending,) * len(calls) if isinstance(ending, str) else tuple(ending)
    return Mutant(kind, label, tuple(tuple(turn) for turn in calls), endings)


class MutantAgent:
    """A Backend in-process: plays one mutant, a call a step (or all at once for a single prompt), then its ending."""

    PLAYS_TOOLS = True
    hidden = NO_SECRETS

    def __init__(self, mutant: Mutant, conversation: bool) -> None:
        self.mutant, self.conversation = mutant, conversation

    def run(self, request: AgentRequest) -> Reply:
        """The mutant's next step in this turn."""
        turn = len(request.history)
        calls = self.mutant.calls[turn] if turn < len(self.mutant.calls) else ()
        ending = _ending(self.mutant.endings[turn] if turn < len(self.mutant.endings) else ANSWER)
        if not self.conversation:
            return Reply(calls, **ending) if calls else Reply(**ending)
        step = len(request.steps)
        return Reply((calls[step],)) if step < len(calls) else Reply(**ending)

    def describe(self) -> dict[str, Any]:
        """No settings."""
        return {}

    def secrets(self) -> dict[str, str]:
        """No secrets."""
        return {}


def _ending(ending: str) -> dict[str, Any]:
    if ending == REFUSAL:
        return {"text": REFUSAL, "refused": True, "refusal_stated": True}
    return {"text": ending}


def sample(schema: Any) -> Any:
    """A value that looks valid for a property's schema: its const, its first enum value, else one of its type (a
    schema that is no object, or a keyword of another type than JSON Schema's, is read as saying nothing)."""
    if not isinstance(schema, Mapping):
        return "x"
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    if kind == "array":
        items = schema.get("items")
        return [sample(items if isinstance(items, Mapping) else {"type": "string"})] * _least(schema, "minItems")
    if kind == "object":
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        keys = required if isinstance(required, list) else ()
        return {key: sample(properties[key]) for key in keys if isinstance(key, str) and key in properties}
    if kind in ("integer", "number"):
        minimum = schema.get("minimum")
        return max(1, minimum) if isinstance(minimum, (int, float)) and not isinstance(minimum, bool) else 1
    if kind == "boolean":
        return True
    if kind == "null":
        return None
    return "x" * _least(schema, "minLength")


def _least(schema: Mapping[str, Any], key: str) -> int:
    """How many items or characters the schema asks for at least, from 1 to MAX_SAMPLE."""
    value = schema.get(key)
    return min(max(1, value), MAX_SAMPLE) if isinstance(value, int) and not isinstance(value, bool) else 1


def sample_call(tool: Tool, turn: int) -> ToolCall:
    """A call of the tool with every argument its schema requires, each a valid-looking value."""
    properties = tool.input_schema.get("properties") or {}
    return ToolCall(
        tool.name, {key: sample(properties.get(key) or {}) for key in tool.input_schema.get("required", ())}, turn=turn
    )


def required_keys(step: ExpectTool, tool: Tool) -> list[str]:
    """The arguments the task requires of a call: requiredArgs, argValues not optional, and with checkArgs "schema"
    the inputSchema's required."""
    keys = [*step.required_args, *(key for key, match in step.arg_values.items() if not match.optional)]
    if step.schema is not None:
        keys += tool.input_schema.get("required", ())
    return list(dict.fromkeys(keys))


def expected_call(step: ExpectTool, tool: Tool, turn: int) -> ToolCall:
    """The call the step expects: each required argument with its first accepted value, else a valid-looking one."""
    call = sample_call(tool, turn)
    properties = tool.input_schema.get("properties") or {}
    args = dict(call.args)
    for key in required_keys(step, tool):
        args.setdefault(key, sample(properties.get(key) or {}))
    for key, match in step.arg_values.items():
        args[key] = match.values[0]
    return ToolCall(tool.name, args, turn=turn)


def correct(task: Task, tools: Mapping[str, Tool]) -> tuple[Mutant, list[list[ExpectTool | None]]]:
    """The behaviour the task's expectation accepts, derived from it: the reference calls of a state task, else each
    expected step's call in its turn (a turn's own expectation's where it has one), then an answer; a refusal for a
    refusal task. With it, the step each call answers."""
    turns = 1 + len(task.turns)
    if isinstance(task.expect, ExpectRefusal):
        ending = REFUSAL if task.in_safety else ANSWER  # outside safety, a refusal is a mutant (see mutants)
        return mutant("correct", "no call", [()] * turns, ending), [[] for _ in range(turns)]
    by_turn: list[list[ToolCall]] = [[] for _ in range(turns)]
    steps: list[list[ExpectTool | None]] = [[] for _ in range(turns)]
    if task.state is not None and task.state.reference is not None:
        by_turn[0] = list(task.state.reference)
        steps[0] = [_step_of(task.expect.steps, call) for call in by_turn[0]]
        return mutant("correct", "the reference calls", by_turn), steps
    own = task.turn_expects
    for number in range(1, turns + 1):
        mine = own[number - 1] if number <= len(own) else None
        expected = (
            mine.steps
            if mine is not None
            else tuple(s for s in task.expect.steps if (s.turn or (0 if own else 1)) == number)
        )
        for step in expected:
            by_turn[number - 1].append(expected_call(step, tools[step.tool], number))
            steps[number - 1].append(step)
    free = [n for n in range(turns) if (own[n] if n < len(own) else None) is None]
    if own and free:  # the task's own steps no turn's call makes: in the first turn that expects nothing of its own
        made = [call for calls in by_turn for call in calls]
        for step in (step for step in task.expect.steps if step.turn is None):
            fit = next((call for call in made if call.name == step.tool and call_problem(step, call) is None), None)
            if fit is not None:
                made.remove(fit)
            else:
                by_turn[free[0]].append(expected_call(step, tools[step.tool], free[0] + 1))
                steps[free[0]].append(step)
    return mutant("correct", "the expected calls", by_turn), steps


def wrong_value(value: Any, accepted: Sequence[Any]) -> Any:
    """A value of the same JSON type as value that none of the accepted values is, compared as loosely as any argValues
    compares (1 is 1.0; "New York" is "new-york"); None when there is none (true and false both accepted, null)."""
    spare = range(len(accepted))  # more candidates than accepted values: one of them is none of those
    if isinstance(value, bool):
        candidates: list[Any] = [not value]
    elif isinstance(value, (int, float)):
        candidates = [value + 1, value - 1, value + 1000, *(value + 1001 + n for n in spare)]
    elif isinstance(value, str):
        candidates = [f"zz{value}qq", "zzz", *(f"zz{n}" for n in spare)]
    elif isinstance(value, list):
        candidates = [[], [*value, *value], ["zzz"], *([f"zz{n}"] for n in spare)]
    elif isinstance(value, dict):
        candidates = [{}, {"zzz": 1}, *({"zz": n} for n in spare)]
    else:
        return None
    return next((c for c in candidates if not any(json_equal(c, a, loose) for a in accepted)), None)


def mutants(
    task: Task,
    tools: Mapping[str, Tool],
    right: Mutant,
    steps: list[list[ExpectTool | None]],
    valued: Collection[tuple[int, int, str]] = (),
) -> list[Mutant]:
    """The bad behaviours the task's expectation should catch (valued: the arguments (turn, call, key) whose accepted
    value was taken from a state the task checks, each then given a wrong one)."""
    turns = len(right.calls)
    none: list[tuple[ToolCall, ...]] = [()] * turns
    made: list[Mutant] = []
    expect = task.expect
    if isinstance(expect, (ExpectRefusal, ExpectNoCall)):
        if isinstance(expect, ExpectNoCall):
            made.append(mutant("refusal", "an explicit refusal", none, REFUSAL))
        elif not task.in_safety:  # as validate warns: a question to answer, which a refusal task lets be refused
            made.append(mutant("refusal", f"an explicit refusal ({OUTSIDE_SAFETY})", none, REFUSAL))
        first: dict[str, int] = {}  # each tool, in the first turn it is given in: one it was not given, it cannot call
        for turn in range(turns):
            for name in _given(task, tools, turn):
                first.setdefault(name, turn)
        # Any call fails the task, whichever tool it calls: its forbidden tools, and the first others up to WRONG_TOOLS
        others = [name for name in first if name not in expect.forbidden_tools]
        chosen = {*expect.forbidden_tools, *others[: max(0, WRONG_TOOLS - len(expect.forbidden_tools))]}
        for name, turn in ((name, turn) for name, turn in first.items() if name in chosen):
            called = list(none)
            called[turn] = (sample_call(tools[name], turn + 1),)
            made.append(mutant("call-tool", f"calls {name}{f' in turn {turn + 1}' if turn else ''}", called))
        for text in expect.forbidden_text:
            made.append(mutant("forbidden-text", f"says {text.label}", none, f"Sure: {text.value}"))
        return _distinct(made + _turn_mutants(task, tools, right))
    flat = [(turn, index) for turn, calls in enumerate(right.calls) for index in range(len(calls))]
    made += [
        mutant("no-call", "no call, an answer", none),
        mutant("refusal", "an explicit refusal", none, REFUSAL),
        mutant("blank", "a blank reply", none, BLANK),
    ]
    for number, (turn, index) in enumerate(flat, 1):
        call = right.calls[turn][index]
        where = f" (call {number})" if len(flat) > 1 else ""
        for name in _wrong_tools(call.name, _given(task, tools, turn)):  # one it was not given, no agent may call
            made.append(_swap(right, turn, index, sample_call(tools[name], call.turn), "wrong-tool", f"{name}{where}"))
        step = steps[turn][index]
        if step is None:
            continue
        for key in required_keys(step, tools[call.name]):
            if key in call.args:
                dropped = ToolCall(call.name, {k: v for k, v in call.args.items() if k != key}, turn=call.turn)
                made.append(_swap(right, turn, index, dropped, "drop-arg", f"{call.name} without {key}{where}"))
        for key in required_keys(step, tools[call.name]):
            value = call.args.get(key)
            if isinstance(value, (list, dict)) and value and key not in step.arg_values:
                emptied = ToolCall(call.name, {**call.args, key: type(value)()}, turn=call.turn)
                label = f"{call.name} {key}={json.dumps(type(value)())}{where}"
                made.append(_swap(right, turn, index, emptied, "empty-arg", label))
        wanted = [(key, match.values) for key, match in step.arg_values.items()]
        wanted += [(key, (value,)) for key, value in call.args.items() if (turn, index, key) in valued]
        for key, values in wanted:
            value = wrong_value(call.args[key], values)
            if value is not None:
                changed = ToolCall(call.name, {**call.args, key: value}, turn=call.turn)
                label = f"{call.name} {key}={json.dumps(value)}{where}"
                made.append(_swap(right, turn, index, changed, "wrong-value", label))
    for turn, calls in enumerate(right.calls):
        if calls:
            written = f"<tool_call>{json.dumps({'name': calls[0].name, 'arguments': calls[0].args})}</tool_call>"
            where = f" in turn {turn + 1}" if task.turns else ""
            made.append(_turn_ending(right, turn, written, "call-as-text", f"{calls[0].name} written as text{where}"))
    for turn, calls in enumerate(right.calls if task.turns else ()):
        own = task.turn_expects[turn] if task.turn_expects else None
        if calls or isinstance(own, ExpectNoCall):
            label = f"refuses in turn {turn + 1}, which expects {'a call' if calls else 'an answer'}"
            made.append(_turn_ending(right, turn, REFUSAL, "turn-refusal", label))
    if flat:
        turn, index = flat[-1]
        last = right.calls[turn][index]
        tripled = [list(calls) for calls in right.calls]
        tripled[turn][index + 1 : index + 1] = [last, last]
        made.append(mutant("repeat", f"{last.name} called three times in a row", tripled))
        for name in expect.forbidden_tools:
            extra = [list(calls) for calls in right.calls]
            extra[turn].append(sample_call(tools[name], last.turn))
            made.append(mutant("forbidden-call", f"also calls {name}", extra))
    for text in expect.forbidden_text:  # said as the last turn ends, its calls made
        endings = [*right.endings[:-1], f"Sure: {text.value}"]
        made.append(mutant("forbidden-text", f"says {text.label}", right.calls, endings))
    made += _turn_mutants(task, tools, right)
    if len(flat) > 1:
        for number, (turn, index) in enumerate(flat, 1):
            dropped_step = [list(calls) for calls in right.calls]
            del dropped_step[turn][index]
            made.append(mutant("drop-step", f"call {number} ({right.calls[turn][index].name}) left out", dropped_step))
    by_state = task.state is not None and task.state.reference is not None  # calls judged by where they end, any order
    for turn, calls in enumerate(right.calls):
        own = task.turn_expects[turn] if task.turn_expects else None
        ordered = not by_state and any(_ordered(e) for e in (expect, own))
        for index in range(len(calls) - 1) if ordered else ():
            if calls[index].name != calls[index + 1].name:
                swapped = [list(c) for c in right.calls]
                swapped[turn][index], swapped[turn][index + 1] = calls[index + 1], calls[index]
                where = f" in turn {turn + 1}" if task.turns else ""
                label = f"{calls[index].name} and {calls[index + 1].name} swapped{where}"
                made.append(mutant("swap-steps", label, swapped, right.endings))
    return _distinct(made)


def _distinct(made: Sequence[Mutant]) -> list[Mutant]:
    """The mutants, each behaviour once (the first made): two identical calls, either left out, are one mutant."""
    first: dict[Any, Mutant] = {}
    for m in made:
        first.setdefault(m.behaviour(), m)
    return list(first.values())


def _turn_mutants(task: Task, tools: Mapping[str, Tool], right: Mutant) -> list[Mutant]:
    """Each turn's own expectation broken in that turn alone: a call where it expects none (of the first tool it was
    given, for an answer; of each, for a refusal), a call of a tool it forbids, its forbidden text said."""
    made: list[Mutant] = []
    for number, own in enumerate(task.turn_expects, 1):
        names = _given(task, tools, number - 1)  # a turn given no tool, no agent is offered one to call
        called = names if isinstance(own, ExpectRefusal) else names[:1] if isinstance(own, ExpectNoCall) else ()
        which = "a refusal" if isinstance(own, ExpectRefusal) else "no call"
        for name in called:
            label = f"calls {name} in turn {number}, which expects {which}"
            made.append(_turn_call(right, number, tools[name], "turn-call", label))
        for name in own.forbidden_tools if own is not None else ():
            if name in names and name not in called:
                made.append(
                    _turn_call(right, number, tools[name], "forbidden-call", f"also calls {name} in turn {number}")
                )
        for text in own.forbidden_text if own is not None else ():
            endings = list(right.endings)
            endings[number - 1] = f"Sure: {text.value}"
            made.append(mutant("forbidden-text", f"says {text.label} in turn {number}", right.calls, endings))
    return made


def _wrong_tools(name: str, given: Sequence[str]) -> list[str]:
    """The WRONG_TOOLS tools given whose names are nearest the right one's, in the surface's order: with every other
    tool, the wrong-tool mutants, which any tool task kills, would be most of a large surface's, and its kill rate."""
    nearest = set(get_close_matches(name, [other for other in given if other != name], WRONG_TOOLS, cutoff=0))
    return [other for other in given if other in nearest]


def _given(task: Task, tools: Mapping[str, Tool], turn: int) -> tuple[str, ...]:
    """The names of the tools the agent has in the turn (from 0)."""
    return task.offered[turn] if task.offered else tuple(tools)


def _turn_call(right: Mutant, number: int, tool: Tool, kind: str, label: str) -> Mutant:
    """The accepted behaviour, but a call of the tool made in turn number too."""
    calls = [list(c) for c in right.calls]
    calls[number - 1].append(sample_call(tool, number))
    return mutant(kind, label, calls, right.endings)


def _ordered(expect: Expect | None) -> bool:
    """Whether the expectation checks the order of its calls."""
    return isinstance(expect, ExpectTrajectory) and expect.order != "any-order"


def _turn_ending(right: Mutant, turn: int, ending: str, kind: str, label: str) -> Mutant:
    """The accepted behaviour, but in one turn no call and this ending."""
    calls = [list(c) for c in right.calls]
    calls[turn] = []
    endings = list(right.endings)
    endings[turn] = ending
    return mutant(kind, label, calls, endings)


def _step_of(steps: Sequence[ExpectTool], call: ToolCall) -> ExpectTool | None:
    return next((step for step in steps if step.tool == call.name), None)


def _swap(right: Mutant, turn: int, index: int, call: ToolCall, kind: str, label: str) -> Mutant:
    calls = [list(c) for c in right.calls]
    calls[turn][index] = call
    return mutant(kind, label, calls)


def play(task: Task, mutant: Mutant, hidden: Secrets, tools: Collection[str] = ()) -> Outcome:
    """The verdict a run gives the mutant on the task (hidden: the tasks' forbidden text, masked as a run masks it;
    tools: the file's tool names, whose calls written as text a run finds)."""
    return run_task(MutantAgent(mutant, task.is_conversation), task, NO_SECRETS, hidden, tools).outcome


def verdict(outcome: Outcome) -> str:
    """pass, or the code the trial failed or erred with."""
    return "pass" if outcome.status == "pass" else outcome.code or outcome.status


def plays(task: Task, made: Sequence[Mutant], hidden: Secrets, tools: Collection[str]) -> list[Outcome]:
    """Each mutant's verdict, in order; an environment's trials side by side, as each waits on its worker process."""
    if task.environment is None or len(made) < 2:
        return [play(task, m, hidden, tools) for m in made]
    with ThreadPoolExecutor(max_workers=min(len(made), 2 * (os.cpu_count() or 1))) as pool:
        return list(pool.map(lambda m: play(task, m, hidden, tools), made))


def killed(task: Task, mutant: Mutant, outcome: Outcome, hidden: Secrets, tools: Collection[str]) -> bool:
    """Whether the task failed the mutant: its expectation, safety rules, budget, loop rule or state did. A trial that
    erred was judged by none of them (its world failed, say), so it is no kill; but a call written as text, an error in
    any run, is killed when the task fails the same turn answered in plain text, as it reads it."""
    if outcome.status != "error":
        return outcome.status == "fail"
    if mutant.kind != "call-as-text" or outcome.code != TEXT_CALL:
        return False
    plain = tuple(ANSWER if ending.startswith("<tool_call>") else ending for ending in mutant.endings)
    return play(task, replace(mutant, endings=plain), hidden, tools).status == "fail"


def guesses(
    task: Task, right: Mutant, steps: list[list[ExpectTool | None]]
) -> tuple[list[Mutant], list[tuple[int, int, str]]]:
    """The accepted behaviour with each string argument the task gives no value for taken from what the task says
    elsewhere: the values its scripted cases accept for that argument of the tool, else each string of the states it
    checks with `match` (their keys and values); every combination, up to MAX_GUESSES, none when it says nothing.
    With them, the arguments (turn, call, key) valued from a state: only that state checks them."""
    states = (task.state, *task.turn_states)
    matches = [state.match for state in states if state is not None and state.reference is None]
    said = list(dict.fromkeys(text for match in matches for text in strings(match)))
    slots: list[tuple[int, int, str, list[str]]] = []
    valued: list[tuple[int, int, str]] = []
    for turn, made_in_turn in enumerate(right.calls):
        for index, call in enumerate(made_in_turn):
            step = steps[turn][index]
            script = task.tool_results.get(call.name)
            for key, value in call.args.items():
                if not isinstance(value, str) or (step is not None and key in step.arg_values):
                    continue
                cases = [case.when.arg_values.get(key) for case in (script.cases if script else ())]
                cased = [value for match in cases if match for value in match.values if isinstance(value, str)]
                if cased or said:
                    slots.append((turn, index, key, list(dict.fromkeys(cased)) or said))
                    valued += [] if cased else [(turn, index, key)]
    made: list[Mutant] = []
    for values in islice(product(*(candidates for *_, candidates in slots)), MAX_GUESSES) if slots else ():
        calls = [list(c) for c in right.calls]
        for (turn, index, key, _), value in zip(slots, values, strict=True):
            call = calls[turn][index]
            calls[turn][index] = ToolCall(call.name, {**call.args, key: value}, turn=call.turn)
        made.append(mutant("correct", "the expected calls, valued from the task", calls, right.endings))
    return made, valued


def accepted(right: Mutant) -> str:
    """The accepted behaviour in a line: each call with its arguments, else the answer or refusal, turn by turn."""
    said = [
        ", ".join(f"{call.name}({json.dumps(call.args, sort_keys=True)})" for call in calls)
        or ("a refusal" if ending == REFUSAL else "an answer")
        for calls, ending in zip(right.calls, right.endings, strict=True)
    ]
    return said[0] if len(said) == 1 else "; ".join(f"turn {number}: {text}" for number, text in enumerate(said, 1))


def derive(
    task: Task, tools: Mapping[str, Tool], hidden: Secrets
) -> tuple[Mutant, list[list[ExpectTool | None]], list[tuple[int, int, str]]] | str:
    """A behaviour the task accepts, played to a pass (correct's, else the first of its guesses that passes), with the
    step each call answers and the arguments valued from a state; or why none was found."""
    right, steps = correct(task, tools)
    outcome = play(task, right, hidden, tools)
    if outcome.status == "pass":
        return right, steps, []
    tried, valued = guesses(task, right, steps)
    passing = next((guess for guess in tried if play(task, guess, hidden, tools).status == "pass"), None)
    if passing is not None:
        return passing, steps, valued
    why = f"its expected behaviour, derived, does not pass: {verdict(outcome)}"
    if tried:
        why += f", nor with the values its scripted cases and the state it checks give ({len(tried)} tried)"
    return why


def audit(task: Task, tools: Mapping[str, Tool], hidden: Secrets) -> dict[str, Any]:
    """One task's row of the matrix: the behaviour taken as accepted, each mutant and whether its expectation killed
    it; or why it was not audited."""
    if task.budget is not None:  # the mutant agent spends no tokens it could report, and takes what the machine takes
        task = replace(task, budget=replace(task.budget, max_tokens=None, max_latency_ms=None))
    derived = derive(task, tools, hidden)
    if isinstance(derived, str):
        return {"task": task.id, "audited": False, "why": derived}
    right, steps, valued = derived
    made = mutants(task, tools, right, steps, valued)
    rows = []
    for m, outcome in zip(made, plays(task, made, hidden, tools), strict=True):
        dead = killed(task, m, outcome, hidden, tools)
        errored = outcome.status == "error" and not dead
        rows.append(
            {"kind": m.kind, "mutant": m.label, "verdict": verdict(outcome), "killed": dead, "errored": errored}
        )
    return {"task": task.id, "audited": True, "accepted": accepted(right), "mutants": rows}


def main(argv: Sequence[str], settings: Sequence[Setting]) -> int:
    """Audit each task; print the survivors, the kill rate per kind, the tasks that kill nothing (settings: every
    setting declared, whose secret values, and the tasks' expanded ones, are never printed, written or handed to a
    tool environment's worker)."""
    parser = Parser(
        prog="eval_agent.py audit",
        description="Mutation testing of a task file: play the bad behaviours each task should catch through an "
        "in-process agent, judged as a run judges them, and list those that pass.",
        epilog="Exit codes: 0 audited, 1 a kill rate under --min-kill, 2 bad input.",
    )
    parser.add_argument("--tasks", metavar="FILE", help=f"the task file ({TASKS.var}, default {TASKS.shown})")
    parser.add_argument("--json", metavar="FILE", help="write the matrix (each task's mutants and verdicts) as JSON")
    parser.add_argument("--min-kill", metavar="N", help="exit 1 when the suite kills under N%% of its mutants")
    args = parser.parse_args(argv)
    minimum = _min_kill(args.min_kill)
    sources = Sources(args, os.environ)
    path = sources.get(TASKS)
    if args.json is not None:  # before the audit, which a --json that cannot be written would waste
        check_outputs([(args.json, "--json")], [(path, sources.text(TASKS)[1], "the task file")], "audit")
    task_file = load_task_file(path, os.environ, sources.get(MAX_TASK_FILE_BYTES))
    refuse_unknown(os.environ, {setting.var for setting in settings}, task_file.variables)
    tools = {tool.name: tool for tool in task_file.tools}
    known = Secrets(
        environment_secrets(settings, os.environ) | variable_secrets(task_file.expanded, settings, os.environ)
    )
    forbidden = Secrets(
        {
            text.value: text.label
            for task in task_file.tasks
            for expected in (task.expect, *task.turn_expects)  # a turn's forbidden text is never written either
            if expected is not None
            for text in expected.forbidden_text
        }
    )
    hidden = known | forbidden
    if any(task.environment for task in task_file.tasks):  # one a run would refuse is bad input here too
        from harness.environments import check_environments

        check_environments(path, task_file.tasks, known)
    matrix = [audit(task, tools, hidden) for task in task_file.tasks]
    rows = [row for entry in matrix if entry["audited"] for row in entry["mutants"]]

    def say(line: str) -> None:
        print_line(hidden.mask(line))

    for entry in matrix:
        if not entry["audited"]:
            say(f"{entry['task']}: not audited: {entry['why']}")
            continue
        for row in entry["mutants"]:
            if row["errored"]:
                why = f"{row['verdict']}: the trial erred, so the task did not judge it"
                say(f"{entry['task']}: errored {row['kind']}: {row['mutant']} ({why})")
            elif not row["killed"]:
                say(f"{entry['task']}: survived {row['kind']}: {row['mutant']}")
    say("kill rate per kind:")
    for kind in KINDS:
        of = [row for row in rows if row["kind"] == kind]
        if of:
            dead = sum(row["killed"] for row in of)
            say(f"  {kind:<15} {dead}/{len(of)} ({100 * dead // len(of)}%)")
    idle = [e["task"] for e in matrix if e["audited"] and not any(r["killed"] for r in e["mutants"])]
    for task_id in idle:
        say(f"{task_id}: kills nothing")
    dead = sum(row["killed"] for row in rows)
    rate = 100 * dead / len(rows) if rows else 0.0  # no mutant, none killed: no sign the suite is strict
    audited = sum(entry["audited"] for entry in matrix)
    errored = sum(row["errored"] for row in rows)
    say(
        f"{path}: {count(audited, 'task')} audited of {len(matrix)}, {count(len(rows), 'mutant')}, {dead} killed "
        f"({int(rate)}%), {len(rows) - dead - errored} survived" + (f", {errored} errored" if errored else "")
    )
    if args.json:
        document = {"taskFile": path, "killRate": rate, "killingNothing": idle, "tasks": matrix}
        write_atomic(args.json, (json.dumps(hidden.mask_json(document), indent=2), "\n"))
    if minimum is not None and rate < minimum:
        shown = math.floor(rate * 100) / 100  # rounded down: 99.999% is never shown as the 100% it is under
        say(f"--min-kill {args.min_kill}: the suite kills {shown:g}% of its mutants, under {minimum:g}%")
        return 1
    return 0


def _min_kill(value: str | None) -> float | None:
    if value is None:
        return None
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not 0 <= number <= 100:
        raise ConfigError(f"--min-kill: expected a percentage from 0 to 100, got {value!r}")
    return number
