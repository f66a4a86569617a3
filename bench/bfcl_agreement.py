"""Our argument verdicts against the Berkeley Function Calling Leaderboard's own checker, on its public data.

Run: pip download bfcl-eval==2026.3.23 --no-deps -d /tmp/bfcl
     python3 bench/bfcl_agreement.py /tmp/bfcl/bfcl_eval-2026.3.23-py3-none-any.whl

The wheel holds BFCL's questions, possible answers and AST checker; it is read in place (a zip on sys.path), with the
one module its checker imports that pulls in every model SDK replaced by a stand-in. Nothing of it is copied here.

Each answer of the Python categories (simple, multiple, parallel, parallel_multiple and their live_ versions) is
ported as docs/porting.md says: the function's parameters become an inputSchema (dict -> object,
float -> number, tuple -> array, any -> no type), each parameter's possible values an argValues entry (`""` ->
"optional": true, strings -> "ignorePunctuation": true), "checkArgs": "schema" on the file; a parallel answer is an
any-order trajectory. The file is loaded by the harness's own loader. Then candidate calls are made from each answer
(as given, with optional parameters left out, strings recased or repunctuated, numbers retyped, a wrong value, an
extra argument, a required one left out, calls reordered, dropped or repeated) and judged by both checkers.

Prints, per kind of candidate, how often the verdicts agree, and which differences are the rules docs/porting.md says we
deliberately do not follow.
"""

from __future__ import annotations

import collections
import copy
import itertools
import json
import os
import sys
import tempfile
import types
import zipfile
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from harness.records import ConfigError, Reply, ToolCall  # noqa: E402
from harness.scoring import score  # noqa: E402
from harness.taskfile import load_task_file  # noqa: E402

CATEGORIES = (
    "simple_python", "multiple", "parallel", "parallel_multiple",
    "live_simple", "live_multiple", "live_parallel", "live_parallel_multiple",
)  # fmt: skip
TYPES = {"dict": "object", "float": "number", "tuple": "array", "any": None}
KEPT = ("description", "enum", "default", "maximum", "minimum", "format")  # BFCL's `optional` is not JSON Schema
MAX_EXPANSION = 256  # a dict answer's alternatives per key, multiplied out; past this the answer is skipped


def main(wheel: str) -> None:
    checker, language = bfcl_checker(wheel)
    with zipfile.ZipFile(wheel) as archive:
        data = [
            (category, question, truths[question["id"]])
            for category in CATEGORIES
            for truths in [{row["id"]: row["ground_truth"] for row in read_lines(archive, answers_of(category))}]
            for question in read_lines(archive, f"bfcl_eval/data/BFCL_v4_{category}.json")
        ]
    print(f"{len(data)} answers, {sum(len(truth) for _, _, truth in data)} calls, in {len(CATEGORIES)} categories")
    tables = {mode: judge(data, mode, checker, language) for mode in ("keys", "schema")}
    kinds = list(tables["keys"][0])
    print(f"\n{'':<34} {'checkArgs keys':^44}   {'checkArgs schema':^44}")
    head = f"{'agree':>7} {'both pass':>9} {'both fail':>9} {'BFCL only':>9} {'ours only':>9}"
    print(f"{'candidate':<34} {head}   {head}")
    for kind in [*kinds, "all"]:
        cells = []
        for mode in ("keys", "schema"):
            tally = tables[mode][0]
            counts = sum(tally.values(), collections.Counter()) if kind == "all" else tally[kind]
            agree = counts["pass/pass"] + counts["fail/fail"]
            cells.append(
                f"{agree / sum(counts.values()):>7.1%} {counts['pass/pass']:>9} {counts['fail/fail']:>9}"
                f" {counts['pass/fail']:>9} {counts['fail/pass']:>9}"
            )
        print(f"{kind:<34} {'   '.join(cells)}")
    for mode in ("keys", "schema"):
        _, skipped, judged = tables[mode]
        print(f"\ncheckArgs {mode}: {judged} candidate replies judged; answers not ported: {sum(skipped.values())}")
        for reason, n in skipped.most_common(8):
            print(f"  {n:>4}  {reason}")


def answers_of(category: str) -> str:
    return f"bfcl_eval/data/possible_answer/BFCL_v4_{category}.json"


def judge(
    data: list[tuple[str, dict[str, Any], list[dict[str, Any]]]], mode: str, checker: Any, language: Any
) -> tuple[dict[str, collections.Counter[str]], collections.Counter[str], int]:
    """Per kind of candidate, the pair of verdicts (BFCL's/ours) counted; why answers could not be ported."""
    tally: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    skipped: collections.Counter[str] = collections.Counter()
    judged = 0
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "t.json")
        for category, question, truth in data:
            task_file = port(question, truth, mode)
            if task_file is None:
                skipped["a dict answer with too many alternatives"] += 1
                continue
            with open(path, "w", encoding="utf-8") as f:
                json.dump(task_file, f)
            try:
                task = load_task_file(path, {}).tasks[0]
            except ConfigError as error:
                # the problem, its JSON path and quoted values dropped: one line per kind
                skipped[str(error).split(": ", 2)[-1].split(":")[0][:90]] += 1
                continue
            for kind, calls in candidates(question["function"], truth, "parallel" in category):
                theirs = checker(question["function"], calls, truth, language, category, "stand-in")["valid"]
                reply = Reply(tuple(ToolCall(name, args) for call in calls for name, args in call.items()))
                ours = score(task, reply).status == "pass"
                tally[kind][f"{'pass' if theirs else 'fail'}/{'pass' if ours else 'fail'}"] += 1
                judged += 1
    return tally, skipped, judged


def bfcl_checker(wheel: str) -> tuple[Any, Any]:
    """BFCL's ast_checker from the wheel; its model table (every provider's SDK) replaced by names kept as they are."""
    sys.path.insert(0, wheel)
    stand_in = types.ModuleType("bfcl_eval.constants.model_config")
    as_they_are = collections.defaultdict(lambda: types.SimpleNamespace(underscore_to_dot=False))
    stand_in.MODEL_CONFIG_MAPPING = as_they_are  # type: ignore[attr-defined]
    sys.modules["bfcl_eval.constants.model_config"] = stand_in
    from bfcl_eval.constants.enums import Language  # type: ignore[import-not-found]
    from bfcl_eval.eval_checker.ast_eval.ast_checker import ast_checker  # type: ignore[import-not-found]

    return ast_checker, Language.PYTHON


def read_lines(archive: zipfile.ZipFile, name: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in archive.read(name).decode("utf-8").splitlines() if line.strip()]


def port(question: dict[str, Any], truth: list[dict[str, Any]], mode: str) -> dict[str, Any] | None:
    """The question and its answer as a task file, ported as docs/porting.md says; None when an answer cannot be
    multiplied out."""
    tools = [
        {"name": f["name"], "description": f.get("description", ""), "inputSchema": schema(f["parameters"])}
        for f in question["function"]
    ]
    steps = []
    for call in truth:
        ((name, params),) = call.items()
        function = next(f for f in question["function"] if f["name"] == name)
        values = {}
        for key, accepted in params.items():
            kind = function["parameters"]["properties"].get(key, {}).get("type")
            # an answer of only "" (the parameter left out, or given empty): "" is then its one accepted value
            options = [expanded for value in accepted if value != "" for expanded in expand(value, kind)] or [""]
            if len(options) > MAX_EXPANSION:
                return None
            entry: dict[str, Any] = {"anyOf": options}
            if "" in accepted and key not in function["parameters"].get("required", []):
                entry["optional"] = True
            if any(has_string(option) for option in options):
                entry["ignorePunctuation"] = True
            values[key] = entry
        steps.append({"tool": name, "argValues": values})
    expect = steps[0] if len(steps) == 1 else {"trajectory": steps, "order": "any-order"}
    prompt = json.dumps(question["question"])[:2000]
    task = {"id": "t", "category": "bfcl", "prompt": prompt, "expect": expect}
    return {"version": 1, "checkArgs": mode, "tools": tools, "tasks": [task]}


def schema(parameters: dict[str, Any]) -> dict[str, Any]:
    """A BFCL parameter description as JSON Schema."""
    out: dict[str, Any] = {key: parameters[key] for key in KEPT if key in parameters}
    kind = TYPES.get(parameters.get("type", "any"), parameters.get("type"))
    if kind is not None:
        out["type"] = kind
    if "properties" in parameters:
        out["properties"] = {key: schema(value) for key, value in parameters["properties"].items()}
    if "items" in parameters:
        out["items"] = schema(parameters["items"])
    if "required" in parameters:
        out["required"] = [key for key in parameters["required"] if key in parameters.get("properties", {})]
    return out


def expand(value: Any, kind: str | None) -> list[Any]:
    """A dict answer's alternatives per key (`""`: the key left out), multiplied out into whole values."""
    if kind == "dict" and isinstance(value, dict):
        per_key = [[(key, v) for v in alternatives] for key, alternatives in value.items()]
        return [
            {k: v for k, v in combo if v != ""}
            for combo in itertools.islice(itertools.product(*per_key), MAX_EXPANSION + 1)
        ]
    if kind == "array" and isinstance(value, list) and value and all(isinstance(item, dict) for item in value):
        each = [expand(item, "dict") for item in value]
        return [list(combo) for combo in itertools.islice(itertools.product(*each), MAX_EXPANSION + 1)]
    return [value]


def has_string(value: Any) -> bool:
    if isinstance(value, str):
        return True
    if isinstance(value, list):
        return any(has_string(item) for item in value)
    if isinstance(value, dict):
        return any(has_string(item) for item in value.values())
    return False


def candidates(
    functions: list[dict[str, Any]], truth: list[dict[str, Any]], parallel: bool
) -> list[tuple[str, list[dict[str, Any]]]]:
    """Replies made from the answer, each with the kind of change it carries."""
    given = [{name: first_values(params, functions, name)} for call in truth for name, params in call.items()]
    made: list[tuple[str, list[dict[str, Any]]]] = [("as given", given)]
    for index, call in enumerate(given):
        ((name, args),) = call.items()
        params = truth[index][name]
        required = next(f for f in functions if f["name"] == name)["parameters"].get("required", [])

        def variant(kind: str, new_args: dict[str, Any], index: int = index, name: str = name) -> None:
            calls = copy.deepcopy(given)
            calls[index] = {name: new_args}
            made.append((kind, calls))

        optional = [key for key, accepted in params.items() if "" in accepted and key in args]
        if optional:
            variant("optional left out", {k: v for k, v in args.items() if k not in optional})
        strings = [key for key, value in args.items() if isinstance(value, str) and value.strip()]
        for key in strings[:1]:
            variant("string: case changed", {**args, key: args[key].swapcase()})
            variant("string: spaces, commas, dots", {**args, key: args[key].replace(" ", "").replace(",", "") + "."})
            variant("string: other punctuation (!)", {**args, key: args[key] + "!"})
            variant("string: another word", {**args, key: args[key] + " zzz"})
        numbers = [
            key for key, value in args.items() if isinstance(value, (int, float)) and not isinstance(value, bool)
        ]
        for key in numbers[:1]:
            value = args[key]
            if isinstance(value, int):
                variant("number: int sent as float", {**args, key: float(value)})
            elif value.is_integer():
                variant("number: whole float sent as int", {**args, key: int(value)})
            variant("number: sent as a string", {**args, key: str(value)})
            variant("number: another value", {**args, key: value + 1000})
        variant("an extra argument", {**args, "unrequested_arg": "x"})
        missing = [key for key in required if key in args]
        if missing:
            variant("a required argument left out", {k: v for k, v in args.items() if k != missing[0]})
        if len(given) == 1:
            made.append(("the call made twice", given + given))
    if parallel and len(given) > 1:
        made.append(("calls in another order", list(reversed(given))))
        made.append(("one call left out", given[:-1]))
        made.append(("one call made twice", given + given[:1]))
    return made


def first_values(params: dict[str, list[Any]], functions: list[dict[str, Any]], name: str) -> dict[str, Any]:
    """The call the answer's first alternatives make, every optional parameter given."""
    properties = next(f for f in functions if f["name"] == name)["parameters"].get("properties", {})
    args = {}
    for key, accepted in params.items():
        values = [value for value in accepted if value != ""]
        if values:
            args[key] = expand(values[0], properties.get(key, {}).get("type"))[0]
    return args


if __name__ == "__main__":
    if len(sys.argv) != 2 or not os.path.isfile(sys.argv[1]):
        sys.exit(__doc__.split("\n\n")[1])
    main(sys.argv[1])
