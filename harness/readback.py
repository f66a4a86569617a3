"""What the harness reads back of a results file (a baseline, compare's, merge's and report's inputs): the shape of
every field it or a report relies on, so that a file that loads is one every report can render; built by the runs that
read one alone."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from decimal import Decimal
from typing import Any, get_args

from harness.records import ResultSource
from harness.text import LARGEST, MAX_GROWTH, count, kind
from harness.verdict import GATE_PLACES

Check = Callable[[Any], "str | None"]  # a value -> why it is not what the reader needs, or None


def _is(what: str, test: Callable[[Any], bool], bounds: str = "") -> Check:
    """A check that says what it expected, and, to a number that is not, the bounds it expected it within."""

    def check(value: Any) -> str | None:
        if test(value):
            return None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return f"expected {what}{bounds}, got {json.dumps(value)}"
        return f"expected {what}, got {kind(value)}"

    return check


class Maybe:
    """A value of the shape given, or null."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape


class IfThere:
    """A key that older files or other runs may not have; when it is there, a value of the shape given."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape


class Each:
    """An object of any keys (each passing `key`, when given), every value of the shape given."""

    def __init__(self, shape: Any, key: Check | None = None) -> None:
        self.shape = shape
        self.key = key


class NonEmpty:
    """A list of at least one item, each of the shape given."""

    def __init__(self, shape: Any) -> None:
        self.shape = shape


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and -LARGEST <= value <= LARGEST


def _whole(value: Any, least: int = 0) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and least <= value <= LARGEST


def _percentage(value: Any) -> bool:
    return _number(value) and 0 <= value <= 100


def _gate(value: Any) -> bool:
    """A gate as a run writes it: a percentage of at most GATE_PLACES decimals."""
    exponent = Decimal(repr(value)).normalize().as_tuple().exponent if _percentage(value) else None
    return isinstance(exponent, int) and -exponent <= GATE_PLACES


def _counting(text: str) -> bool:
    """Digits that int() reads as a count: ASCII (isdigit() takes a superscript two), and not thousands of them."""
    return text.isascii() and text.isdigit() and len(text) < 16 and int(text) >= 1


def _shard(value: Any) -> bool:
    index, slash, total = value.partition("/") if isinstance(value, str) else ("", "", "")
    return slash != "" and _counting(index) and _counting(total) and int(index) <= int(total)


TEXT = _is("a string", lambda value: isinstance(value, str))
MAYBE_TEXT = _is("a string or null", lambda value: value is None or isinstance(value, str))
FLAG = _is("true or false", lambda value: isinstance(value, bool))
WHOLE = _is("a whole number", _whole, " up to 2^53")
COUNT = _is("a whole number", lambda value: _whole(value, 1), " from 1 to 2^53")
NUMBER = _is("a number", _number, " from -2^53 to 2^53")
PERCENT = _is("a percentage from 0 to 100", _percentage)
GROWTH_LIMIT = _is(f"a percentage from 0 to {MAX_GROWTH}", lambda value: _number(value) and 0 <= value <= MAX_GROWTH)
OBJECT = _is("an object", lambda value: isinstance(value, dict))
ANY = _is("any JSON value", lambda value: True)
STATUS = _is("pass, fail or error", lambda value: value in ("pass", "fail", "error"))
REFUSER = _is("provider, model or null", lambda value: value in ("provider", "model", None))
SOURCES = get_args(ResultSource)
SOURCE = _is(f"{', '.join(SOURCES[:-1])} or {SOURCES[-1]}", lambda value: value in SOURCES)
CALLS = [{"name": TEXT, "args": OBJECT, "reportedName": IfThere(TEXT)}]
STEP = {
    "toolCalls": CALLS,
    "text": IfThere(MAYBE_TEXT),
    "results": IfThere(
        [
            {
                "name": TEXT,
                "result": ANY,
                "scripted": IfThere(FLAG),
                "source": IfThere(SOURCE),
                "case": IfThere(WHOLE),
                "unreported": IfThere(FLAG),
            }
        ]
    ),
    "error": IfThere(TEXT),
}
TRIAL = {
    "status": STATUS,
    "code": MAYBE_TEXT,
    "reason": MAYBE_TEXT,
    "violation": MAYBE_TEXT,
    "toolCalls": CALLS,
    "refused": FLAG,
    "refusedBy": IfThere(REFUSER),
    "refusalReason": IfThere(TEXT),
    "text": MAYBE_TEXT,
    "attempts": WHOLE,
    "durationMs": NUMBER,
    "usage": Maybe({"inputTokens": WHOLE, "outputTokens": WHOLE}),
    "reportedUsage": IfThere({"inputTokens": WHOLE, "outputTokens": WHOLE}),
    "modelCalls": IfThere(
        {
            "count": WHOLE,
            "models": [TEXT],
            "inputTokens": Maybe(WHOLE),
            "outputTokens": Maybe(WHOLE),
            "latencyMs": NUMBER,
            "calls": [
                {
                    "format": TEXT,
                    "model": MAYBE_TEXT,
                    "status": WHOLE,
                    "inputTokens": Maybe(WHOLE),
                    "outputTokens": Maybe(WHOLE),
                    "latencyMs": NUMBER,
                    "error": IfThere(TEXT),
                }
            ],
        }
    ),
    "turns": IfThere(WHOLE),
    "steps": IfThere(WHOLE),
    "conversationId": IfThere(TEXT),
    "conversation": IfThere(
        NonEmpty(
            {
                "user": TEXT,
                "steps": NonEmpty(STEP),
                "verdict": IfThere({"status": STATUS, "code": MAYBE_TEXT, "reason": MAYBE_TEXT}),
                "state": IfThere(ANY),
                "stateCut": IfThere(FLAG),
            }
        )
    ),
    "unscripted": IfThere([TEXT]),
    "finalState": IfThere(ANY),
    "finalStateCut": IfThere(FLAG),
    "referenceStateSha256": IfThere(TEXT),
}
ENTRY = {
    "id": TEXT,
    "category": TEXT,
    "sha256": TEXT,
    "blocking": FLAG,
    "budget": IfThere(  # the task's, when it or its file has one
        {
            "maxTokens": IfThere(COUNT),
            "maxToolCalls": IfThere(COUNT),
            "maxCallsPerTool": IfThere(Each(COUNT)),
            "maxLatencyMs": IfThere(_is("milliseconds", lambda value: _number(value) and value > 0, " more than 0")),
            "maxRepeats": IfThere(Maybe(COUNT)),
            "blocking": FLAG,
        }
    ),
    # The task's quarantine, when it has one, and whether it held it out of the gate on the day the run started.
    "quarantine": IfThere({"until": TEXT, "reason": TEXT, "issue": MAYBE_TEXT, "active": FLAG}),
    "expected": IfThere(TEXT),
    "prompt": IfThere(TEXT),
    "status": STATUS,
    "code": MAYBE_TEXT,
    "reason": MAYBE_TEXT,
    "violation": MAYBE_TEXT,
    "passes": WHOLE,
    "trials": COUNT,
    "flaky": FLAG,
    "adaptive": IfThere(  # --runs auto's: the trials it spent and why it stopped
        {
            "trials": WHOLE,
            "stoppedBecause": _is(
                "reliable, unreliable, max or cut-short",
                lambda value: value in ("reliable", "unreliable", "max", "cut-short"),
            ),
        }
    ),
    "trialResults": [TRIAL],
}
# --runs auto's settings as --runs auto reads them: what merge and report work the sequential test out of, and compare
# shows
AUTO_SETTINGS = {
    "max": _is("a whole number from 1 to 100", lambda value: _whole(value, 1) and value <= 100),
    "confidence": _is(
        f"a percentage above 50 and below 100 of at most {GATE_PLACES} decimals",
        lambda value: _gate(value) and 50 < value < 100,
    ),
    "reliability": _is(
        f"a percentage above 0 and below 100 of at most {GATE_PLACES} decimals",
        lambda value: _gate(value) and 0 < value < 100,
    ),
}
# What the harness reads back of a results file (a baseline, compare's, merge's and report's inputs): every field it
# or a report relies on, so that a file that loads is one every report can render.
DOCUMENT = {
    "runId": TEXT,
    "fingerprint": TEXT,
    "manifest": {
        "backend": TEXT,
        "backendSettings": OBJECT,
        "taskFile": IfThere(OBJECT),
        "selection": {
            "shard": Maybe(_is("K/N, a shard", _shard)),
            "taskIds": [TEXT],
            "mergedShards": IfThere(COUNT),
        },
        "record": IfThere({"cassette": TEXT}),
        "replay": IfThere({"cassette": TEXT, "sha256": TEXT, "recordMissing": FLAG}),
        "rateLimits": IfThere(
            {"rateLimited": WHOLE, "waitedMs": NUMBER, "peakConcurrency": WHOLE, "finalConcurrency": COUNT}
        ),
        "adaptive": IfThere(AUTO_SETTINGS),
    },
    "startedAt": TEXT,
    "durationMs": NUMBER,
    "interrupted": FLAG,
    "notRun": [TEXT],
    "passed": WHOLE,
    "failed": WHOLE,
    "errored": WHOLE,
    "total": WHOLE,
    "passRate": PERCENT,
    "gate": _is(f"a percentage from 0 to 100 of at most {GATE_PLACES} decimals", _gate),
    "gateOn": _is("trials or pass-all", lambda value: value in ("trials", "pass-all")),
    "gatePassed": FLAG,
    "gateFailedBecause": [TEXT],
    "internalError": IfThere(MAYBE_TEXT),
    "runs": _is("a whole number from 1", lambda value: _whole(value, 1)),
    "passAllK": Each(PERCENT, key=_is("a number of runs", _counting)),
    "passAll": IfThere(PERCENT),  # --runs auto's: the share of tasks every trial of which passed
    "adaptive": IfThere({**AUTO_SETTINGS, "trials": WHOLE, "fixedTrials": WHOLE, "saved": NUMBER}),
    "flaky": [TEXT],
    "blockingFailed": [TEXT],
    "violations": [TEXT],
    "replayMissed": IfThere([TEXT]),
    "overBudget": IfThere(WHOLE),
    "regressed": [TEXT],
    "quarantined": IfThere(
        {
            "tasks": [TEXT],
            "passed": WHOLE,
            "failed": WHOLE,
            "errored": WHOLE,
            "total": WHOLE,
            "passAllK": Each(PERCENT, key=_is("a number of runs", _counting)),
            "flaky": [TEXT],
            "regressed": [TEXT],
            "violations": [TEXT],
        }
    ),
    "growth": IfThere(
        Each(
            {
                "then": Maybe(NUMBER),
                "now": Maybe(NUMBER),
                "percent": Maybe(NUMBER),
                "limit": Maybe(GROWTH_LIMIT),
                "exceeded": FLAG,
                "tasks": WHOLE,
            },
            key=_is("tokens, toolCalls or latencyMs", lambda value: value in ("tokens", "toolCalls", "latencyMs")),
        )
    ),
    "usage": IfThere(Maybe({"inputTokens": WHOLE, "outputTokens": WHOLE, "latencyMs": NUMBER})),
    "byCategory": Each({"passed": WHOLE, "total": WHOLE, "passRate": IfThere(PERCENT)}),  # passRate: --runs auto's
    "results": [ENTRY],
}


def _problem(value: Any, shape: Any, path: str) -> str | None:
    """Why the value is not of the shape (`results[3]: no trialResults`), or None."""
    if isinstance(shape, Maybe):
        return None if value is None else _problem(value, shape.shape, path)
    if isinstance(shape, dict):
        if not isinstance(value, dict):
            return f"{path}: expected an object, got {kind(value)}"
        for key, inner in shape.items():
            if key not in value and not isinstance(inner, IfThere):
                return f"{path or 'the top level'}: no {key}"
            inner = inner.shape if isinstance(inner, IfThere) else inner
            problem = _problem(value[key], inner, f"{path}.{key}" if path else key) if key in value else None
            if problem is not None:
                return problem
        return None
    if isinstance(shape, Each):
        if not isinstance(value, dict):
            return f"{path}: expected an object, got {kind(value)}"
        for key, item in value.items():
            why = shape.key(key) if shape.key else None
            problem = f"{path}: {json.dumps(key)}: {why}" if why else _problem(item, shape.shape, f"{path}.{key}")
            if problem is not None:
                return problem
        return None
    if isinstance(shape, (list, NonEmpty)):
        if not isinstance(value, list):
            return f"{path}: expected a list, got {kind(value)}"
        if isinstance(shape, NonEmpty) and not value:
            return f"{path}: expected a list of at least one, got an empty list"
        item_shape = shape.shape if isinstance(shape, NonEmpty) else shape[0]
        return next((p for i, item in enumerate(value) if (p := _problem(item, item_shape, f"{path}[{i}]"))), None)
    why = shape(value)
    return f"{path}: {why}" if why else None


def _trials(entry: Mapping[str, Any], index: int) -> str | None:
    if entry["trials"] != len(entry["trialResults"]):
        return f"results[{index}].trials: {entry['trials']}, but {len(entry['trialResults'])} trialResults"
    if entry["passes"] > entry["trials"]:
        return f"results[{index}].passes: {entry['passes']}, more than its {count(entry['trials'], 'trial')}"
    for number, trial in enumerate(entry["trialResults"]):
        missing = [key for key in ("turns", "steps") if "conversation" in trial and key not in trial]
        if missing:
            return f"results[{index}].trialResults[{number}]: a conversation, but no {missing[0]}"
    return None


def problem_in(document: Mapping[str, Any]) -> str | None:
    """The first thing that makes a results document (of this schema version) not one this harness reads, or None."""
    problem = _problem(document, DOCUMENT, "")
    if problem is None:
        problem = next(filter(None, (_trials(entry, i) for i, entry in enumerate(document["results"]))), None)
    return problem
