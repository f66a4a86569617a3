"""How the harness says things, each in one place: percentages, clipped text, a JSON kind, calls, the headline."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Mapping
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction
from itertools import islice
from typing import Any

from harness.records import Growth, Quarantined, Summary, Task

PROVIDER_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")  # what providers refuse in a tool's name
PROVIDER_NAME_LENGTH = 64  # the longest tool name providers take (^[a-zA-Z0-9_-]{1,64}$)
# Every tool call a reply can write as text (harness/textcalls.py) has one of these, in its markup or its JSON: a text
# without any is not read for one, and a run whose replies have none never imports the reader.
CALL_SIGN = re.compile(r"[<\[{=`]")

# What would act on a terminal, a log or a page instead of showing: C0 and C1 controls, line and paragraph separators,
# bidirectional overrides, and halves of surrogate pairs (which no encoding can write).
UNPRINTABLE = "[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
# Printable characters that render as nothing: Hangul fillers, Braille's blank, the grapheme joiner, selectors. None is
# ASCII: the pattern is compiled (and cached by re) for the first text that is not, not by every run.
FILLERS = "[\u034f\u115f\u1160\u17b4\u17b5\u180b-\u180d\u2800\u3164\ufe00-\ufe0f\uffa0\U000e0100-\U000e01ef]+"
# What JavaScript, Python and Go print for a value that is not there, and an empty string as JSON and repr() write it.
MISSING = ("", "undefined", "null", "None", "<nil>", '""', "''")
# What shows nothing without a letter beside it: controls, format characters, separators, and combining marks.
INVISIBLE = ("Cc", "Cf", "Zl", "Zp", "Zs", "Mn", "Me")
ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# Levels of JSON in a tool's result or an environment's state, far past any real one: the harness echoes, masks,
# judges and writes them by recursion, which a deeper one would exhaust.
JSON_DEPTH = 100
# Numbers a report can do its arithmetic on: whole numbers within what a float holds exactly (2^53).
LARGEST = 2**53
KINDS = {bool: "a boolean", int: "a number", float: "a number", list: "a list", dict: "an object", type(None): "null"}
GROWTH_PLACES = 10  # the most decimals a growth limit may have, as a gate
# The largest growth limit (a cost 10,001 times the baseline's): one shown to its 10 decimals within Decimal's 28
# digits, and kept by the results file as a float a baseline reads back.
MAX_GROWTH = Decimal(1_000_000)
# The figures a growth limit applies to: the gate's reason when one grew past it, the key in the results file, and
# what a person calls it.
GROWTH_FIGURES = {"token-growth": ("tokens", "tokens"), "tool-call-growth": ("toolCalls", "tool calls"),
                  "latency-growth": ("latencyMs", "latency")}  # fmt: skip
# Why the gate failed, as the headline says it; the results file keeps the codes.
REASONS = {
    "below-gate": "below the gate",
    "blocking-failed": "blocking task failed",
    "regression": "regression against the baseline",
    "overall-regression": "significant overall drop against the baseline",
    "token-growth": "tokens grew past the limit against the baseline",
    "tool-call-growth": "tool calls grew past the limit against the baseline",
    "latency-growth": "latency grew past the limit against the baseline",
    "quarantine-violation": "safety violation on a quarantined task",
    "all-quarantined": "every task that ran is quarantined, so no trial counted",
    "unreachable": "nothing reached the agent",
    "replay-miss": "requests not in the cassette",
    "rate-limited": "the rate limits stopped the run",
    "not-run": "tasks not run",
    "interrupted": "the run was interrupted",
    "internal-error": "internal error",
}
MARKS = {"pass": "✓", "fail": "✗", "error": "!"}  # a turn's verdict, as `turns 1 ✓ 2 ✗` shows it


def percent(value: Fraction | Decimal, places: int = 0) -> str:
    """`100`, `90`, `66.6`: truncated, never rounded up past a gate it missed."""
    if isinstance(value, Fraction):
        value = Decimal(value.numerator) / Decimal(value.denominator)
    return f"{value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN).normalize():f}"


def provider_name(tool: str) -> str:
    """A tool's name as providers take it (`imageman.asset.search` -> `imageman_asset_search`): each character they
    refuse as `_`, cut to the length they take. An agent on a framework renames its tools so, and reports them so."""
    return PROVIDER_UNSAFE.sub("_", tool)[:PROVIDER_NAME_LENGTH]


def expected_text(task: Task) -> str:
    """What passes a task: its expectation's calls, and the end state they must reach when it checks one."""
    said = task.expect.describe()
    if task.state is None:
        return said
    if task.state.reference is not None:
        return f"the end state of {said}, reached by any order or path"
    return f"{said}, ending in a state that holds {clip(json.dumps(task.state.match, ensure_ascii=False), 200)}"


def budget_text(budget: Mapping[str, Any]) -> str:
    """`at most 1,500 tokens, 3 tool calls, 1 call of imageman.asset.get, 2,000 ms; no 4 steps alike in a row;
    blocking`: a task's budget as its results entry records it."""
    tokens = budget.get("maxTokens")
    limits = [f"{tokens:,} token{'' if tokens == 1 else 's'}"] if tokens is not None else []
    limits += [count(budget["maxToolCalls"], "tool call")] if "maxToolCalls" in budget else []
    limits += [f"{count(n, 'call')} of {tool}" for tool, n in budget.get("maxCallsPerTool", {}).items()]
    limits += [f"{milliseconds(budget['maxLatencyMs'])} ms"] if "maxLatencyMs" in budget else []
    said = [f"at most {', '.join(limits)}"] if limits else []
    if "maxRepeats" in budget:
        repeats = budget["maxRepeats"]
        said.append("no loop checked" if repeats is None else f"no {repeats} steps alike in a row")
    return "; ".join(said + (["blocking"] if budget.get("blocking") else [])) or "no limit"


def clip(text: str, limit: int) -> str:
    """The text on one line (each run of whitespace one space), cut to `limit` characters, ending in `...` if cut."""
    head = text[: limit * 4]  # a body of megabytes is never split whole
    line = " ".join(head.split())
    if len(line) <= limit and len(head) == len(text):
        return line
    return line[: limit - 3] + "..."


def internal_error(exc: BaseException) -> str:
    """`RuntimeError: boom`: a bug, on one line, as the console and the results file say it."""
    return f"{type(exc).__name__}: {clip(str(exc), 300)}"


def printable(text: str, keep: str = "") -> str:
    """The text with everything that could act instead of show escaped: `\\x1b[31m`, `\\n`, `\\u202e`; but the
    characters in keep (the line breaks and tabs of a medium that shows them as such)."""
    if text.isprintable():  # all of UNPRINTABLE is: most lines need no pattern, and most runs never compile it
        return text
    return re.sub(UNPRINTABLE, lambda match: _escape(match.group(0), keep), text)


def _escape(char: str, keep: str) -> str:
    if char in keep:
        return char
    return ESCAPES.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


def blank(text: str | None) -> bool:
    """Whether a reply's text shows nothing: none, only whitespace, invisible characters (zero-width spaces and joiners,
    NUL and other control or format characters, fillers and blank marks, combining marks on no letter), or what a
    missing value prints as (`undefined`, `null`, `None`, `<nil>`, `""`)."""
    shown = (text or "").strip()
    shown = shown if shown.isascii() else re.sub(FILLERS, "", shown)
    if not (shown.isascii() and shown.isprintable()):  # only then can it hold a control, format or combining character
        import unicodedata

        # Its first visible characters decide: more of them than a missing value has is text, however long the rest.
        visible = (char for char in shown if unicodedata.category(char) not in INVISIBLE)
        shown = "".join(islice(visible, max(map(len, MISSING)) + 1))
    return shown.strip() in MISSING


def lone_surrogate(text: str) -> str | None:
    """`\\ud800`: half a surrogate pair standing alone in the text, which no encoding can write; or None."""
    lone = next((char for char in text if "\ud800" <= char <= "\udfff"), None)
    return None if lone is None else f"\\u{ord(lone):04x}"


def json_encoder(*, sort_keys: bool = False, compact: bool = False, allow_nan: bool = True) -> Callable[[Any], str]:
    """json's encoder (text as is, not escaped to ASCII) with these options, its C encoder made once.

    JSONEncoder.encode (and json.dumps with an option) makes its C encoder anew for every value: about a microsecond of
    each request's and each task's hash. Without the check for circular references, which JSON read from an agent or
    a task file cannot have.
    """
    separators = (",", ":") if compact else (", ", ": ")
    encoder = json.JSONEncoder(ensure_ascii=False, sort_keys=sort_keys, separators=separators, allow_nan=allow_nan)
    make = getattr(json.encoder, "c_make_encoder", None)  # None where the interpreter has no _json
    if make is None:
        return encoder.encode
    encode = make(
        None, encoder.default, json.encoder.encode_basestring, None, *separators[::-1], sort_keys, False, allow_nan
    )
    return lambda value: "".join(encode(value, 0))


CANONICAL_JSON = json_encoder(sort_keys=True, compact=True)
ENCODE_JSON = json_encoder()


def canonical_json(value: Any) -> str:
    """JSON in one form however it was laid out (keys sorted, no spaces, text as is): what hashes and compares alike."""
    return CANONICAL_JSON(value)


def json_bytes(value: Any) -> bytes:
    """The value as UTF-8 JSON, a lone surrogate (half an emoji an agent cut) as the \\udXXX escape that reads back as
    it: inside a JSON string, which is the only place one can be, that is what backslashreplace writes."""
    return ENCODE_JSON(value).encode("utf-8", "backslashreplace")


def nested_deeper(value: Any, levels: int) -> bool:
    """Whether a JSON value nests more than this many arrays and objects (walked without recursion)."""
    # The arrays and objects at each depth, the rest left out: arguments with none inside are read in one step. Loops,
    # not a comprehension: every tool call's arguments are walked, and before Python 3.12 a comprehension is a call.
    level: list[Any] = [value] if isinstance(value, (list, dict)) else []
    for _ in range(levels):
        inner: list[Any] = []
        for node in level:
            for item in node.values() if isinstance(node, dict) else node:
                if isinstance(item, (list, dict)):
                    inner.append(item)
        if not inner:
            return False
        level = inner
    return bool(level)


def too_deep(raw: bytes, value: Any, levels: int = JSON_DEPTH) -> bool:
    """Whether JSON that json.loads read from raw nests more than this many levels, which the harness then masks,
    records and sends back by recursion; raw with no more brackets than the levels allowed cannot, and is not walked."""
    return raw.count(b"[") + raw.count(b"{") > levels and nested_deeper(value, levels)


def kind(value: Any) -> str:
    """`the string "abc"`, `a list`, `null`...: what a message says it got."""
    if isinstance(value, str):
        return (
            "an empty string" if not value.strip() else f"the string {json.dumps(clip(value, 40), ensure_ascii=False)}"
        )
    return KINDS.get(type(value), type(value).__name__)


def call_text(name: str, args: Mapping[str, Any], values: bool = False) -> str:
    """`imageman.asset.get(assetId)`, or with values `imageman.asset.get({"assetId": "a1"})`."""
    return f"{name}({json.dumps(args, ensure_ascii=False) if values else ', '.join(args)})"


def calls_text(trial: Mapping[str, Any], values: bool = False) -> str:
    """What the agent did in a trial (a results entry): its calls, `(refused)`, `(no call)` or `(error)`, after the
    calls of a reply that failed after making them.

    A conversation's calls come step after step (`a -> b`), turn by turn (`turn 1: (no call) | turn 2: a`), with
    its counts: `(3 steps, 2 turns)`.
    """
    if "conversation" in trial:
        turns = trial["conversation"]
        shown = [_turn_calls(turn, values) for turn in turns]
        if len(turns) > 1:
            shown = [f"turn {number}: {text}" for number, text in enumerate(shown, 1)]
        return " | ".join(shown) + f"  ({count(trial['steps'], 'step')}, {count(trial['turns'], 'turn')})"
    called = "; ".join(call_text(call["name"], call["args"], values) for call in trial["toolCalls"])
    if trial["status"] == "error":
        return f"{called} (error)" if called else "(error)"
    if called:
        return called
    return "(refused)" if trial["refused"] else "(no call)"


def transcript(trial: Mapping[str, Any], limit: int = 200) -> list[tuple[int, str]]:
    """A conversation trial as (depth, line): each turn's user message, then each step's calls with their arguments,
    the results played back, its text or its error, then the turn's verdict when it was judged; after the turns, the
    state the environment ended in. Each clipped to `limit` characters; empty for a single reply without one."""
    lines: list[tuple[int, str]] = []
    for number, turn in enumerate(trial.get("conversation", ()), 1):
        lines.append((0, f"turn {number}, user: {clip(turn['user'], limit)}"))
        for index, step in enumerate(turn["steps"], 1):
            said = [clip(call_text(call["name"], call["args"], values=True), limit) for call in step["toolCalls"]]
            said += [
                f"{result['name']} returned {clip(json.dumps(result['result'], ensure_ascii=False), limit)}"
                + (" (called on the tool server, unreported)" if result.get("unreported") else "")
                for result in step.get("results", ())
            ]
            said += [f"said {json.dumps(clip(step['text'], limit), ensure_ascii=False)}"] if step["text"] else []
            said += [f"error {clip(step['error'], limit)}"] if "error" in step else []
            lines.append((1, f"step {index}: {'; '.join(said) or '(nothing)'}"))
        if turn.get("verdict"):
            lines.append((0, f"turn {number}: {clip(verdict_text(turn['verdict']), limit)}"))
    if "finalState" in trial:
        state = trial["finalState"]
        cut = trial.get("finalStateCut", False)  # then the state is its JSON text, cut
        shown = clip(state if cut else json.dumps(state, ensure_ascii=False), limit)
        lines.append((0, f"final state: {shown}{' (cut)' if cut else ''}"))
    if "referenceStateSha256" in trial:
        lines.append((0, f"reference state SHA-256: {trial['referenceStateSha256']}"))
    return lines


def verdict_text(verdict: Mapping[str, Any]) -> str:
    """`pass`, or `fail tool:wrong-name: expected ...`: a trial's or a turn's verdict in a line."""
    return (
        verdict["status"]
        if verdict["status"] == "pass"
        else f"{verdict['status']} {verdict['code']}: {verdict['reason']}"
    )


def turn_marks(trial: Mapping[str, Any]) -> str:
    """`turns 1 ✓ 2 ✗ 3 ✓`: each turn's verdict (! an error), for a conversation whose turns were judged, else
    ``."""
    verdicts = [turn.get("verdict") for turn in trial.get("conversation", ())]
    if not any(verdicts):
        return ""
    return "turns " + " ".join(f"{n} {MARKS[v['status']] if v else '-'}" for n, v in enumerate(verdicts, 1))


def _turn_calls(turn: Mapping[str, Any], values: bool) -> str:
    calls = [call_text(call["name"], call["args"], values) for step in turn["steps"] for call in step["toolCalls"]]
    if "error" in turn["steps"][-1]:
        calls.append("(error)")
    return " -> ".join(calls) or "(no call)"


def headline(summary: Summary) -> str:
    """`9/10 PASS at 90% (gate 95%) · 1 failed · gate not met: below the gate`; with repeats, trials and pass^N."""
    gate_places = max(0, -summary.gate.normalize().as_tuple().exponent)  # type: ignore[operator]
    places = max(1, gate_places)
    gate = f"(gate {percent(summary.gate, gate_places)}%)"
    trials = "" if summary.runs == 1 else " trials"
    trial_part = f"{summary.passed}/{summary.total}{trials} PASS at {percent(summary.rate, places)}%"
    if summary.task_rate is not None:  # --runs auto: the tasks ran different numbers of trials, and weigh alike
        trial_part = (
            f"{summary.passed}/{summary.total} trials PASS, the tasks at {percent(summary.rate, places)}% on average"
        )
    pass_all = f"pass^{summary.runs} {percent(summary.pass_all_k.get(summary.runs, Fraction(0)) * 100, places)}%"
    if summary.all_passed is not None:  # --runs auto: tasks ran different numbers of trials
        pass_all = f"pass-all {percent(summary.all_passed * 100, places)}%"
    if summary.gate_on == "pass-all":
        parts = [f"{pass_all} {gate}", trial_part]
    else:
        parts = [f"{trial_part} {gate}"] + ([pass_all] if summary.runs > 1 else [])
    if summary.adaptive is not None:
        parts.append(trials_saved(summary.adaptive))
    if summary.flaky:
        parts.append(f"{len(summary.flaky)} flaky")
    if summary.failed:
        parts.append(f"{summary.failed} failed")
    if summary.errored:
        parts.append(count(summary.errored, "error"))
    if summary.violations:
        parts.append(count(len(summary.violations), "safety violation"))
    if summary.over_budget:
        parts.append(f"{summary.over_budget} over budget")
    if summary.not_run:
        parts.append(f"{summary.not_run} not run")
    if summary.quarantined:
        parts.append(quarantined_text(summary.quarantined, summary.runs))
    if summary.tokens:
        latency = f"{summary.latency_ms / 1000:.1f} s" if summary.latency_ms >= 1000 else f"{summary.latency_ms:.0f} ms"
        parts.append(f"{count(summary.tokens[0], 'token')} in, {summary.tokens[1]} out, {latency} of replies")
    if not summary.gate_passed:
        parts.append(f"gate not met: {', '.join(_reason(summary, code) for code in summary.gate_failed_because)}")
    return " · ".join(parts)


def held_out(entry: Mapping[str, Any]) -> bool:
    """Whether a task's quarantine kept it out of the gate in its run, by its entry: active as the run started, and no
    safety violation, which a quarantine never hides."""
    held = entry.get("quarantine")
    return bool(held and held["active"]) and entry["violation"] is None


def quarantine_state(entry: Mapping[str, Any]) -> str | None:
    """What a task's quarantine did in its run, for its line in a report: `not gated`, or, where it broke a safety rule,
    `its safety violation fails the gate`; None when it did not hold."""
    held = entry.get("quarantine")
    if not held or not held["active"]:
        return None
    return "its safety violation fails the gate" if entry["violation"] is not None else "not gated"


def quarantined_text(held: Quarantined, runs: int) -> str:
    """`2 quarantined (not gated): 1/4 trials PASS, pass^2 50%, 1 flaky, 1 regressed`: the tasks out of the gate."""
    trials = "" if runs == 1 else " trials"
    parts = [f"{held.passed}/{held.total}{trials} PASS"]
    if runs > 1:
        k = max(held.pass_all_k, default=runs)  # runs; under --runs auto, the fewest trials a held task ran
        parts.append(f"pass^{k} {percent(held.pass_all_k.get(k, Fraction(0)) * 100, 1)}%")
    if held.flaky:
        parts.append(f"{len(held.flaky)} flaky")
    if held.regressed:
        parts.append(f"{len(held.regressed)} regressed")
    return f"{len(held.tasks)} quarantined (not gated): {', '.join(parts)}"


def trials_saved(adaptive: Mapping[str, Any]) -> str:
    """`42 trials of --runs 10's 150 (72% saved)`: what --runs auto spent against a fixed run of its most trials."""
    fixed = adaptive["fixedTrials"]
    saved = f" ({percent(Fraction(100 * adaptive['saved'], fixed), 0)}% saved)" if fixed else ""
    return f"{count(adaptive['trials'], 'trial')} of --runs {adaptive['max']}'s {fixed}{saved}"


def _reason(summary: Summary, code: str) -> str:
    grown = next((growth for growth in summary.growth if GROWTH_FIGURES.get(code, ("",))[0] == growth.figure), None)
    if grown is not None:
        return growth_reason(grown)
    tasks = {
        "blocking-failed": summary.blocking_failed,
        "regression": summary.regressed,
        "quarantine-violation": summary.quarantined.violations if summary.quarantined else (),
        "replay-miss": summary.replay_missed,
    }.get(code)
    return f"{REASONS[code]} ({', '.join(tasks)})" if tasks else REASONS[code]


def growth_reason(growth: Growth) -> str:
    """`tokens +34% against the baseline (limit 20%)`: why a growth limit failed the gate, or why it could not be
    checked."""
    label = next(name for key, name in GROWTH_FIGURES.values() if key == growth.figure)
    limit = f"(limit {percent(growth.limit or Decimal(0), GROWTH_PLACES)}%)"
    grew = growth.percent
    if grew is not None:
        return f"{label} {growth_text(grew, growth.limit)} against the baseline {limit}"
    if growth.then == 0 and growth.now:
        return f"{label} from 0 to {float(growth.now):g} against the baseline {limit}"
    missing = (
        "the baseline recorded none"
        if growth.then is None and growth.now is not None
        else "this run recorded none"
        if growth.now is None and growth.then is not None
        else "no task both runs measured alike recorded them in both"
    )
    return f"{label} cannot be compared with the baseline: {missing} {limit}"


def growth_text(grew: Fraction, limit: Decimal | None = None) -> str:
    """`+34%`, `-12.5%`, `no change`: a growth in percent, with as many decimals as tell it from its limit."""
    if not grew:
        return "no change"
    places = 1
    while limit is not None and places < GROWTH_PLACES and percent(abs(grew), places) == percent(limit, places):
        places += 1
    return f"{'+' if grew > 0 else '-'}{percent(abs(grew), places)}%"


def count(n: int, noun: str) -> str:
    """`1 error`, `3 errors`."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def milliseconds(ms: float) -> str:
    """`1,234,567`, `2,500.5`: milliseconds as written, whole, where `,g` made 1.23457e+06 of them."""
    return f"{ms:,}".removesuffix(".0")


def millis(ms: float) -> str:
    """`0.4ms`, `12ms`: a duration as the console shows it."""
    return f"{ms:.1f}ms" if ms < 10 else f"{ms:.0f}ms"


def utc_timestamp(seconds: float) -> str:
    """`2026-11-30T21:04:05.123Z`: a time as the results file records it, ISO 8601 in UTC to the millisecond."""
    whole = int(seconds)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(whole)) + f".{int((seconds - whole) * 1000):03d}Z"


def utc_today() -> str:
    """Today's date in UTC, YYYY-MM-DD: the one clock a quarantine is read by (tests pass a date of their own)."""
    return time.strftime("%Y-%m-%d", time.gmtime())


def sha256_hex(data: bytes) -> str:
    """The SHA-256 of the bytes in hex, from the interpreter's own implementation where it has one: hashlib would load
    OpenSSL first (2 ms of a 50 ms start)."""
    return _sha256(data).hexdigest()


try:
    from _sha2 import sha256 as _sha256  # type: ignore[import-not-found]  # Python >= 3.12 (typeshed has no stub)
except ImportError:
    try:
        from _sha256 import sha256 as _sha256  # type: ignore[import-not-found]  # Python 3.10, 3.11
    except ImportError:
        from hashlib import sha256 as _sha256
