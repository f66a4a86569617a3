"""BFCL's multi-turn categories through the harness, judged against BFCL's own multi-turn checker.

Run: make test (it installs bfcl-eval without its dependencies into .venv, and mpmath), then
     .venv/bin/python bench/bfcl_multiturn.py [--sample N]
or, with the wheel alone: pip download bfcl-eval==2026.3.23 --no-deps -d /tmp/bfcl
     python3 bench/bfcl_multiturn.py /tmp/bfcl/bfcl_eval-2026.3.23-py3-none-any.whl
All 800 entries take about 20 minutes on two cores (each trial starts a worker); the table comes at the end, and each
kind of replay says on stderr when it starts and ends. `--sample 5` takes well under a minute. `--preflight` only
ports the entries and times the start of their environments (harness/environments.py check_environments: what a run
does before its first request), printing `preflight: N environments, M reference checks, X s`.

The wheel holds BFCL's multi-turn questions (multi_turn_base, _miss_func, _miss_param, _long_context), their ground
truths, the classes their tools run on and the checker; it is read in place (a zip on sys.path) or as installed,
nothing of it copied here (BFCL's MathAPI needs mpmath). Each entry is ported as docs/porting.md says: one task per
entry, its tools those of the classes it involves (a missed function added by `addTools` in the turn that gives it
back), its environment bench/bfcl_envs.py's BfclWorld loaded with the entry's initial config, and per turn the ground
truth's calls as an any-order trajectory with `"state": "reference"`. The ground truths are then played through the
harness as an agent's replies (an agent in this process, in the stub's place), as are seeded mutations of them (a call
left out, two swapped, a wrong value, a call made twice, a turn's calls made a turn early, a turn without calls); each
is judged by the harness and by BFCL's checker, and the agreement is printed, every difference counted under the rule
behind it.
"""

from __future__ import annotations

import argparse
import ast
import collections
import contextlib
import copy
import inspect
import io
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar
from unittest import mock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

import eval_agent  # noqa: E402
from backends import BACKENDS  # noqa: E402
from bench.bfcl_agreement import schema  # noqa: E402
from harness.leaks import NO_SECRETS, Secrets  # noqa: E402
from harness.records import AgentRequest, Reply, ToolCall  # noqa: E402

CATEGORIES = ("multi_turn_base", "multi_turn_miss_func", "multi_turn_miss_param", "multi_turn_long_context")
ENVIRONMENT = os.path.join(ROOT, "bench", "bfcl_envs.py")
SEED = 24
GROUND_TRUTH = ("ground truth, one call per step", "ground truth, a turn's calls in one step")

Call = tuple[str, dict[str, Any]]  # a tool's name and its arguments by keyword
Replay = tuple[tuple[tuple[Call, ...], ...], ...]  # per user turn, the agent's steps, each the calls of one reply


@dataclass(frozen=True)
class Entry:
    """One BFCL multi-turn entry: its question as BFCL keeps it, and its ground truth as calls and as BFCL's text."""

    id: str
    category: str
    question: dict[str, Any]
    truth: tuple[tuple[Call, ...], ...]
    truth_text: list[list[str]]


def use_wheel(wheel: str) -> None:
    """BFCL's package from the wheel, read in place; the environment's worker processes are told where it is."""
    sys.path.insert(0, wheel)
    os.environ["BFCL_WHEEL"] = wheel


def read_entries(sample: int | None = None) -> list[Entry]:
    """Every entry of the four categories (or the first `sample` of each), its ground truth's calls bound to keyword
    arguments."""
    from bench import bfcl_envs

    entries = []
    for category in CATEGORIES:
        truths = {
            row["id"]: row["ground_truth"] for row in bfcl_envs.data_lines(f"possible_answer/BFCL_v4_{category}.json")
        }
        for question in bfcl_envs.data_lines(f"BFCL_v4_{category}.json")[:sample]:
            text = truths[question["id"]]
            calls = tuple(tuple(parse_call(call, bfcl_envs.OWNER) for call in turn) for turn in text)
            entries.append(Entry(question["id"], category, question, calls, text))
    return entries


def parse_call(text: str, owner: Mapping[str, str]) -> Call:
    """A ground-truth call as BFCL writes it (`mv(source='a', destination='b')`, `sort('f')`): its positional
    arguments named from the signature of the method it calls."""
    from bench import bfcl_envs

    node = ast.parse(text, mode="eval").body
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise ValueError(f"not a call: {text}")
    name = node.func.id
    method = getattr(bfcl_envs.bfcl_class(owner[name]), name)
    args = [ast.literal_eval(arg) for arg in node.args]
    keywords = {k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg}
    bound = inspect.signature(method).bind(None, *args, **keywords)
    return name, {key: value for key, value in bound.arguments.items() if key != "self"}


def unportable(entry: Entry) -> str | None:
    """Why the entry cannot be a task, or None: a ground-truth call of a function held back until a later turn (the
    agent is never offered it then, and the loader refuses an expectation of a tool not offered in its turn)."""
    missed = {int(turn): names for turn, names in entry.question.get("missed_function", {}).items()}
    for number, calls in enumerate(entry.truth):
        for name, _ in calls:
            if any(name in names and number < turn for turn, names in missed.items()):
                return f"its ground truth calls {name} before the turn that gives it back"
    return None


def port(entries: Sequence[Entry], folder: str) -> dict[str, Any]:
    """The entries as one task file, to be written in this folder, as docs/porting.md says."""
    from bfcl_eval.constants.default_prompts import (  # type: ignore[import-not-found]
        DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC,
        MAXIMUM_STEP_LIMIT,
    )

    from bench import bfcl_envs

    tools = [
        {"name": doc["name"], "description": doc.get("description", ""), "inputSchema": schema(doc["parameters"])}
        for name in bfcl_envs.CLASSES
        for doc in bfcl_envs.function_docs(name)
    ]
    tasks = []
    for entry in entries:
        classes = entry.question["involved_classes"]
        missed = {int(turn): names for turn, names in entry.question.get("missed_function", {}).items()}
        held_out = {name for names in missed.values() for name in names}
        turns = []
        for number, (messages, calls) in enumerate(zip(entry.question["question"], entry.truth, strict=True)):
            if len(messages) > 1 or any(message["role"] != "user" for message in messages):
                raise ValueError(f"{entry.id}: turn {number + 1} is not one user message")
            turn: dict[str, Any] = {
                "prompt": messages[0]["content"] if messages else DEFAULT_USER_PROMPT_FOR_ADDITIONAL_FUNCTION_FC
            }
            if calls:
                turn["expect"] = turn_expectation(calls)
            if number in missed:
                turn["addTools"] = missed[number]
            turns.append(turn)
        first, *later = turns
        task: dict[str, Any] = {
            "id": entry.id,
            "category": entry.category,
            "prompt": first["prompt"],
            "tools": [
                doc["name"] for name in classes for doc in bfcl_envs.function_docs(name) if doc["name"] not in held_out
            ],
            "environment": {
                "module": os.path.relpath(ENVIRONMENT, folder),
                "class": "BfclWorld",
                "config": world_config(entry),
            },
            "maxSteps": MAXIMUM_STEP_LIMIT,
            "expect": {
                **turn_expectation([call for calls in entry.truth for call in calls]),
                "state": "reference",
                **({"firstTurn": first["expect"]} if "expect" in first and later else {}),
            },
        }
        if later:
            task["turns"] = later
        tasks.append(task)
    return literal({"version": 1, "tools": tools, "tasks": tasks})


def literal(value: Any) -> Any:
    """Every string in the value with each $ written $$, so that the loader's ${VAR} expansion gives it back as it is
    (BFCL's prompts and data hold prices such as "${price}")."""
    if isinstance(value, str):
        return value.replace("$", "$$")
    if isinstance(value, list):
        return [literal(item) for item in value]
    if isinstance(value, dict):
        return {key: literal(item) for key, item in value.items()}
    return value


def turn_expectation(calls: Sequence[Call]) -> dict[str, Any]:
    """Ground-truth calls as an expectation: each call made with its values, in any order (other calls allowed)."""
    steps = [{"tool": name, "argValues": {key: [value] for key, value in args.items()}} for name, args in calls]
    return {"trajectory": steps, "order": "any-order"}


def call_text(call: Call) -> str:
    """A call as BFCL's executor reads one."""
    name, args = call
    return f"{name}({', '.join(f'{key}={value!r}' for key, value in args.items())})"


def state_changes(entry: Entry) -> list[list[bool]]:
    """For each ground-truth call, whether it changes the state, run in order on a fresh world."""
    world = world_of(entry)
    changes = []
    for turn in entry.truth:
        changed = []
        for name, args in turn:
            before = world.state()
            with contextlib.suppress(Exception):
                getattr(world, name)(**copy.deepcopy(args))
            changed.append(world.state() != before)
        changes.append(changed)
    return changes


def world_config(entry: Entry) -> dict[str, Any]:
    """The config of the entry's environment: its classes, their initial config, and whether its data is long."""
    initial = entry.question["initial_config"]
    classes = entry.question["involved_classes"]
    return {
        "classes": classes,
        "scenario": {name: initial[name] for name in classes if name in initial},
        "long_context": "long_context" in entry.category,
    }


def world_of(entry: Entry) -> Any:
    """A fresh environment for the entry, made from the ported task's config as the harness makes one."""
    from bench import bfcl_envs

    return bfcl_envs.BfclWorld(**world_config(entry))


def mutations(entry: Entry, seed: int = SEED) -> Iterator[tuple[str, Replay]]:
    """The entry's ground truth played two ways, then each seeded mutation of it that the entry allows."""
    truth = entry.truth
    yield GROUND_TRUTH[0], play([list(turn) for turn in truth])
    yield GROUND_TRUTH[1], tuple(((*turn,),) if turn else () for turn in truth)
    changes = state_changes(entry)
    places = [(t, c) for t, turn in enumerate(truth) for c in range(len(turn))]
    changing = [(t, c) for t, c in places if changes[t][c]]
    reading = [(t, c) for t, c in places if not changes[t][c]]
    with_args = [(t, c) for t, c in places if truth[t][c][1]]
    pairs = [(t, c) for t, c in places if c + 1 < len(truth[t]) and truth[t][c] != truth[t][c + 1]]
    later = [t for t, turn in enumerate(truth) if t > 0 and turn]
    made = [list(turn) for turn in truth]

    def pick(kind: str, choices: Sequence[Any]) -> Any:
        return random.Random(f"{seed}:{entry.id}:{kind}").choice(choices)

    for kind, choices in (("a state-changing call left out", changing), ("a read-only call left out", reading)):
        if choices:
            t, c = pick(kind, choices)
            yield kind, play([turn[:c] + turn[c + 1 :] if i == t else turn for i, turn in enumerate(made)])
    if pairs:
        t, c = pick("two calls swapped", pairs)
        swapped = [list(turn) for turn in made]
        swapped[t][c], swapped[t][c + 1] = swapped[t][c + 1], swapped[t][c]
        yield "two calls swapped", play(swapped)
    if with_args:
        t, c = pick("a wrong value", with_args)
        name, args = made[t][c]
        key = pick("a wrong value's key", sorted(args))
        wrong = [list(turn) for turn in made]
        wrong[t][c] = (name, {**args, key: other_value(args[key])})
        yield "a wrong value", play(wrong)
    for kind, choices in (("a state-changing call made twice", changing), ("a read-only call made twice", reading)):
        if choices:
            t, c = pick(kind, choices)
            yield kind, play([turn[: c + 1] + turn[c:] if i == t else turn for i, turn in enumerate(made)])
    if later:
        t = pick("a turn's calls made a turn early", later)
        early = [list(turn) for turn in made]
        early[t - 1] += early[t]
        early[t] = []
        yield "a turn's calls made a turn early", play(early)
        t = pick("a turn answered without calls", [0, *later] if truth[0] else later)
        yield "a turn answered without calls", play([[] if i == t else turn for i, turn in enumerate(made)])


def play(turns: Sequence[Sequence[Call]]) -> Replay:
    """Each turn's calls one per step, as a model that calls one tool at a time: the calls past BFCL's steps in a turn
    (the last step answers in words) all in the last step that calls."""
    from bfcl_eval.constants.default_prompts import MAXIMUM_STEP_LIMIT  # type: ignore[import-not-found]

    last = MAXIMUM_STEP_LIMIT - 2
    return tuple(
        tuple((call,) for call in calls[:last]) + ((tuple(calls[last:]),) if calls[last:] else ()) for calls in turns
    )


def other_value(value: Any) -> Any:
    """A value of the same kind that differs."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, (int, float)):
        return value + 1
    if isinstance(value, str):
        return value + "_x"
    if isinstance(value, list):
        return [*value, value[0]] if value else ["x"]
    if isinstance(value, dict):
        return {**value, "x": 1}
    return "x"


def bfcl_verdict(entry: Entry, replay: Replay, run: str) -> str:
    """BFCL's multi-turn checker on the replay: "pass", or its error type."""
    from bfcl_eval.eval_checker.multi_turn_eval import multi_turn_utils  # type: ignore[import-not-found]
    from bfcl_eval.eval_checker.multi_turn_eval.multi_turn_checker import (  # type: ignore[import-not-found]
        multi_turn_checker,
    )

    decoded = [[[call_text(call) for call in step] for step in turn if step] for turn in replay]
    try:
        result = multi_turn_checker(decoded, entry.truth_text, entry.question, entry.category, run)
    finally:
        # Its executor keeps every instance it made in its module's globals, named by run and entry: let them go.
        for name in [name for name in vars(multi_turn_utils) if name.startswith(f"{run}_")]:
            del vars(multi_turn_utils)[name]
    return "pass" if result["valid"] else str(result["error_type"])


class ReplayAgent:
    """An agent in this process, in the stub's place: it answers each task's turns with the calls of its replay, one
    reply per step, and says it is done when the turn's steps are spent."""

    NAME = "stub"
    SETTINGS = ()
    PLAYS_TOOLS = True  # not IN_PROCESS: trials run side by side, each environment in its own worker
    REPLAYS: ClassVar[dict[str, Replay]] = {}  # by task id, set for each run

    @classmethod
    def configure(cls, sources: Any) -> None:
        """No settings."""

    def __init__(self, settings: Any = None, surface: Any = None, run_id: str = "", *, hidden: Secrets = NO_SECRETS):
        self.hidden = hidden

    def secrets(self) -> dict[str, str]:
        return {}

    def describe(self) -> dict[str, Any]:
        return {}

    def run(self, request: AgentRequest) -> Reply:
        replay = self.REPLAYS[request.task_id]
        steps = replay[request.turn - 1] if request.turn <= len(replay) else ()
        if len(request.steps) < len(steps):
            return Reply(tool_calls=tuple(ToolCall(name, args) for name, args in steps[len(request.steps)]))
        return Reply(text="Done.")


def harness_verdicts(task_file: str, replays: Mapping[str, Replay], folder: str) -> dict[str, tuple[str, str]]:
    """The harness's verdict on each task's replay (its status, and the code and reason of a failure), from a run of
    the CLI in this process."""
    out = os.path.join(folder, "results.json")
    argv = ["--tasks", task_file, "--out", out]
    environ = {key: value for key, value in os.environ.items() if not key.startswith("EVAL_")}
    with (
        mock.patch.dict(BACKENDS, {"stub": ReplayAgent}),
        mock.patch.object(ReplayAgent, "REPLAYS", dict(replays)),
        mock.patch.dict(os.environ, environ, clear=True),
        contextlib.redirect_stdout(io.StringIO()),
        contextlib.redirect_stderr(io.StringIO()) as errors,
    ):
        code = eval_agent.main(argv)
    if code not in (0, 1):
        raise RuntimeError(f"the harness ended with exit {code}: {errors.getvalue().strip()[-2000:]}")
    with open(out, encoding="utf-8") as f:
        results = json.load(f)["results"]
    return {row["id"]: (row["status"], f"{row.get('code') or ''} {row.get('reason') or ''}".strip()) for row in results}


# Why the harness and BFCL's checker differ, each rule found from the replay itself (see docs/porting.md).
CALLS_NOT_RESULTS = (
    "calls, not results: a call with another value (or another call) gave the results and the state BFCL expects; "
    "the harness wants the expected call"
)
RESULTS_NOT_CALLS = (
    "results, not calls: every expected call was made with its values, but one answered otherwise (made out of "
    "order); BFCL wants the expected result"
)
ACROSS_TURNS = (
    "across turns: an expected call of this turn was made in an earlier one; BFCL takes its result, the harness "
    "judges each turn's calls on their own"
)
ONE_TURN_BY_STATE = (
    "one turn, its end state: a task of one turn has no turn expectation of its own, and its expected calls make the "
    "reference state rather than being judged one by one; BFCL also wants each expected call's result"
)
END_STATE_ONLY = (
    "the end state: the replay ends in the expected state but passed through another after a turn; BFCL checks the "
    "state after each turn, the harness at the end"
)


def rule(entry: Entry, replay: Replay, bfcl: str, ours: tuple[str, str]) -> str:
    """The rule behind a difference between BFCL's verdict and ours, or the two verdicts when no rule explains it."""
    missing = []  # (turn, call) of each expected call the replay's turn does not make
    for number, (truth, steps) in enumerate(zip(entry.truth, replay, strict=True)):
        made = [call_text(call) for step in steps for call in step]
        for call in map(call_text, truth):
            if call in made:
                made.remove(call)
            else:
                missing.append((number, call))
    earlier = [
        call
        for number, call in missing
        if any(call_text(made) == call for steps in replay[:number] for step in steps for made in step)
    ]
    if bfcl == "pass" and not ours[1].startswith("state:"):
        if missing and len(earlier) == len(missing):
            return ACROSS_TURNS
        if missing:
            return CALLS_NOT_RESULTS
    if bfcl == "multi_turn:execution_response_mismatch" and ours[0] == "pass":
        if not missing:
            return RESULTS_NOT_CALLS
        if len(entry.truth) == 1:
            return ONE_TURN_BY_STATE
    if bfcl == "multi_turn:instance_state_mismatch" and ours[0] == "pass":
        if final_state(entry, replay) == final_state(entry, tuple(((*calls,),) for calls in entry.truth)):
            return END_STATE_ONLY
    return f"no rule: BFCL {bfcl}; the harness {ours[1] or ours[0]}"


def final_state(entry: Entry, replay: Replay) -> Any:
    """The state the replay's calls leave on a fresh environment, each call's exception its answer."""
    world = world_of(entry)
    for name, args in [call for steps in replay for step in steps for call in step]:
        with contextlib.suppress(Exception):
            getattr(world, name)(**copy.deepcopy(args))
    return world.state()


def agreement(
    entries: Sequence[Entry],
    folder: str,
    kinds: Collection[str] = (),
    progress: Callable[[str], None] = lambda line: None,
) -> tuple[dict[str, collections.Counter[str]], dict[str, collections.Counter[str]]]:
    """Per kind of replay (these kinds, or all), the pairs of verdicts (BFCL's/ours) counted, and the differences
    counted by rule; each kind's start and end said to `progress`."""
    by_kind: dict[str, dict[str, Replay]] = collections.defaultdict(dict)
    for entry in entries:
        for kind, replay in mutations(entry):
            if not kinds or kind in kinds:
                by_kind[kind][entry.id] = replay
    tally: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    rules: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    task_file = port(entries, folder)
    task_path = os.path.join(folder, "tasks.json")
    started = time.monotonic()
    for number, (kind, replays) in enumerate(by_kind.items()):
        progress(
            f"[{number + 1}/{len(by_kind)}] {kind}: {len(replays)} replays through the harness, then BFCL's checker"
        )
        with open(task_path, "w", encoding="utf-8") as f:  # the tasks this kind of replay applies to
            json.dump({**task_file, "tasks": [task for task in task_file["tasks"] if task["id"] in replays]}, f)
        ours = harness_verdicts(task_path, replays, folder)
        for entry in entries:
            if entry.id not in replays:
                continue
            theirs = bfcl_verdict(entry, replays[entry.id], f"bench{number}")
            mine = ours[entry.id]
            tally[kind][f"{'pass' if theirs == 'pass' else 'fail'}/{'pass' if mine[0] == 'pass' else 'fail'}"] += 1
            if (theirs == "pass") != (mine[0] == "pass"):
                rules[kind][rule(entry, replays[entry.id], theirs, mine)] += 1
        progress(f"[{number + 1}/{len(by_kind)}] done, {time.monotonic() - started:.0f} s in all")
    return tally, rules


def preflight(entries: Sequence[Entry], folder: str) -> str:
    """The ported tasks' environments started as a run starts them before its first request, and how long it took."""
    from harness.environments import check_environments
    from harness.taskfile import load_task_file

    task_path = os.path.join(folder, "tasks.json")
    with open(task_path, "w", encoding="utf-8") as f:
        json.dump(port(entries, folder), f)
    tasks = load_task_file(task_path, {}).tasks
    started = time.monotonic()
    check_environments(task_path, tasks)
    elapsed = time.monotonic() - started
    environments = {
        json.dumps([t.environment.module, t.environment.config], sort_keys=True) for t in tasks if t.environment
    }
    references = sum(1 for task in tasks if task.state and task.state.reference)
    return f"preflight: {len(environments)} environments, {references} reference checks, {elapsed:.1f} s"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="BFCL's multi-turn categories through the harness and BFCL's checker")
    parser.add_argument("wheel", nargs="?", help="the bfcl-eval wheel (default: the bfcl_eval make test installs)")
    parser.add_argument("--sample", type=int, metavar="N", help="only the first N entries of each category")
    parser.add_argument("--preflight", action="store_true", help="only time the start of the tasks' environments")
    args = parser.parse_args(argv)
    if args.wheel:
        use_wheel(args.wheel)
    entries = []
    for entry in read_entries(args.sample):
        why = unportable(entry)
        if why:
            print(f"not ported: {entry.id}: {why}")
        else:
            entries.append(entry)
    calls = sum(len(turn) for entry in entries for turn in entry.truth)
    print(f"{len(entries)} entries, {sum(len(e.truth) for e in entries)} turns, {calls} ground-truth calls")
    if args.preflight:
        with tempfile.TemporaryDirectory() as folder:
            print(preflight(entries, folder))
        return
    with tempfile.TemporaryDirectory() as folder:
        try:
            tally, rules = agreement(entries, folder, progress=lambda line: print(line, file=sys.stderr, flush=True))
        except RuntimeError as error:  # the harness refused the ported tasks, or failed
            sys.exit(f"bfcl_multiturn: {error}")
    print(f"\n{'replay':<42} {'agree':>7} {'both pass':>9} {'both fail':>9} {'BFCL only':>9} {'ours only':>9}")
    for kind, counts in tally.items():
        agree = counts["pass/pass"] + counts["fail/fail"]
        print(
            f"{kind:<42} {agree / sum(counts.values()):>7.1%} {counts['pass/pass']:>9} {counts['fail/fail']:>9}"
            f" {counts['pass/fail']:>9} {counts['fail/pass']:>9}"
        )
    for kind, counted in rules.items():
        print(f"\n{kind}: the differences, by rule")
        for reason, n in counted.most_common():
            print(f"  {n:>4}  {reason}")


if __name__ == "__main__":
    main()
