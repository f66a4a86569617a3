"""The results document, the source of truth every report renders: task entries, the document, load, atomic write."""

from __future__ import annotations

import json
import math
import os
import re
import stat
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from decimal import Decimal
from fractions import Fraction
from typing import Any, get_args

from harness.files import read_input
from harness.records import (
    ConfigError,
    EndState,
    Figure,
    Growth,
    ModelCall,
    Quarantine,
    Quarantined,
    Result,
    ResultSource,
    Summary,
    Task,
    ToolCall,
    ToolResult,
    Turn,
)
from harness.text import LARGEST, MAX_GROWTH, count, expected_text, json_encoder, kind, sha256_hex, utc_today
from harness.verdict import GATE_PLACES

RESULTS_SCHEMA_VERSION = 2
NON_FINITE = "nonFinite"  # in an object of the results file: where its NaN and infinities were written as strings
# The temporary files of a write and of a run's entries: .eval-<pid>-<12 hex>.tmp, .eval-entries-<pid>-<12 hex>.jsonl.
# Compiled (and cached by re) when a folder first holds a name that starts so, not by every run.
LEFTOVER = r"\.eval-(?:entries-)?([1-9][0-9]{0,9})-[0-9a-f]{12}\.(?:tmp|jsonl)"
STARTED = time.time()
# 1 GiB: over a million trials (a trial takes under 1 KB); json holds what it reads several times over in memory.
MAX_RESULTS_BYTES = 1 << 30
STATE_LIMIT = 64 * 1024  # characters of an environment's final state a trial's record keeps
CONVERSATION_TEXT_LIMIT = 2000  # characters of each message, text and result a conversation record keeps
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


def task_entry(task: Task, trials: Sequence[Result], today: str | None = None) -> dict[str, Any]:
    """A task's entry in the results file: what it expects, its verdict over all its trials, then each trial.

    today: the day the run started (UTC, YYYY-MM-DD), on which its quarantine, if any, is active or not.
    """
    statuses = [trial.outcome.status for trial in trials]
    passes = statuses.count("pass")
    trial_entries = [_trial_entry(trial) for trial in trials]
    miss = explaining_trial(trial_entries) if passes < len(trials) else None
    return {
        "id": task.id,
        "category": task.category,
        "sha256": task.sha256,
        "blocking": task.blocking,
        **({"budget": task.budget.written()} if task.budget is not None else {}),
        **({"quarantine": _quarantine(task.quarantine, today or utc_today())} if task.quarantine else {}),
        "expected": expected_text(task),
        "prompt": task.prompt,
        "status": "pass" if passes == len(trials) else "fail" if "fail" in statuses else "error",
        "code": miss["code"] if miss else None,
        "reason": miss["reason"] if miss else None,
        "violation": next((trial.outcome.violation for trial in trials if trial.outcome.violation), None),
        "passes": passes,
        "trials": len(trials),
        "flaky": 0 < passes < len(trials),
        "trialResults": trial_entries,
    }


def _quarantine(held: Quarantine, today: str) -> dict[str, Any]:
    return {"until": held.until, "reason": held.reason, "issue": held.issue, "active": held.active(today)}


def explaining_trial(trials: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The trial that explains a task's non-pass: its first wrong answer, else its first error; None when all passed."""
    misses = [trial for trial in trials if trial["status"] != "pass"]
    return next((trial for trial in misses if trial["status"] == "fail"), misses[0] if misses else None)


def _trial_entry(result: Result) -> dict[str, Any]:
    reply = result.reply
    stated = reply.refusal_stated or reply.refused_by_provider is not None
    entry: dict[str, Any] = {
        "status": result.outcome.status,
        "code": result.outcome.code,
        "reason": result.outcome.reason,
        "violation": result.outcome.violation,
        "toolCalls": _calls(reply.tool_calls),
        # Refused only when it was said: by the provider (a filter, a refusal stop) or by the agent (refused: true).
        # A provider's model answering in words is counted as refused by the refusal rule, but it is an answer.
        "refused": stated,
        "refusedBy": "provider" if reply.refused_by_provider else "model" if stated else None,
        **({"refusalReason": reply.refused_by_provider} if reply.refused_by_provider else {}),
        "text": reply.text,
        "attempts": reply.attempts,
        "durationMs": round(result.duration_ms, 1),
        "usage": {"inputTokens": reply.usage[0], "outputTokens": reply.usage[1]} if reply.usage else None,
        "turns": 1,
        "steps": 1,
    }
    if result.turns:
        entry["turns"] = len(result.turns)
        entry["steps"] = sum(len(turn.steps) for turn in result.turns) or 1
        if result.conversation_id:
            entry["conversationId"] = result.conversation_id
        entry["conversation"] = [_turn_entry(turn) for turn in result.turns]
        unscripted = {
            r.call.name: None for turn in result.turns for step in turn.steps for r in step.results if not r.answered
        }
        entry["unscripted"] = list(unscripted)
    if result.end is not None:
        entry.update(_end_entry(result.end))
    if result.model_calls is not None:
        entry["modelCalls"] = _model_calls(result.model_calls)
        if result.reported_usage is not None:
            entry["reportedUsage"] = {"inputTokens": result.reported_usage[0], "outputTokens": result.reported_usage[1]}
    return entry


def _model_calls(calls: Sequence[ModelCall]) -> dict[str, Any]:
    """What the model proxy saw of a trial's model calls: how many, the models, the tokens (null unless every answered
    call said its own), the time they took, and each call."""
    from harness.proxied import proxied_usage

    usage = proxied_usage(calls)
    return {
        "count": len(calls),
        "models": list(dict.fromkeys(call.model for call in calls if call.model)),
        "inputTokens": usage and usage[0],
        "outputTokens": usage and usage[1],
        "latencyMs": round(sum(call.latency_ms for call in calls), 1),
        "calls": [
            {
                "format": call.form,
                "model": call.model,
                "status": call.status,
                "inputTokens": call.input_tokens,
                "outputTokens": call.output_tokens,
                "latencyMs": call.latency_ms,
                **({"error": call.error} if call.error else {}),
            }
            for call in calls
        ],
    }


def _end_entry(end: EndState, key: str = "finalState") -> dict[str, Any]:
    """An environment's state as the results keep it (the final one, or a turn's as key): whole, or its JSON text
    cut to STATE_LIMIT with the key's Cut; the reference state's SHA-256 when it was held to one."""
    text = json.dumps(end.state, ensure_ascii=False)
    entry: dict[str, Any] = (
        {key: end.state} if len(text) <= STATE_LIMIT else {key: text[: STATE_LIMIT - 3] + "...", f"{key}Cut": True}
    )
    if end.reference_sha256 is not None:
        entry["referenceStateSha256"] = end.reference_sha256
    return entry


def _calls(calls: Sequence[ToolCall]) -> list[dict[str, Any]]:
    """Each call by its tool's name, and the name the agent reported when it was read as that tool's."""
    return [
        {"name": call.name, "args": call.args}
        if call.reported_name is None
        else {"name": call.name, "args": call.args, "reportedName": call.reported_name}
        for call in calls
    ]


def _turn_entry(turn: Turn) -> dict[str, Any]:
    """A turn as the results keep it: the user's message, then each step's calls, text and the results played back;
    its verdict, for a task that judges its turns, and the state it ended in, for a turn that checks it."""
    steps = []
    for step in turn.steps:
        reply = step.reply
        entry: dict[str, Any] = {"toolCalls": _calls(reply.tool_calls), "text": _cut(reply.text)}
        if step.results:
            entry["results"] = [_result_entry(result) for result in step.results]
        if reply.error_code is not None:
            entry["error"] = f"{reply.error_code}: {reply.error}"
        steps.append(entry)
    entry = {"user": _cut(turn.user), "steps": steps}
    if turn.verdict is not None:
        entry["verdict"] = {"status": turn.verdict.status, "code": turn.verdict.code, "reason": turn.verdict.reason}
    return entry if turn.end is None else {**entry, **_end_entry(turn.end, "state")}


def _result_entry(result: ToolResult) -> dict[str, Any]:
    """A played-back result as the results keep it: the tool, the result, and where it came from."""
    entry = {
        "name": result.call.name,
        "result": _cut_json(result.content),
        "scripted": result.scripted,
        "source": result.source,
    }
    if result.case is not None:
        entry["case"] = result.case
    if result.unreported:  # the tool server answered it, and the agent's reply left it out
        entry["unreported"] = True
    return entry


def _cut(text: str | None) -> str | None:
    """A text of the conversation record, cut to CONVERSATION_TEXT_LIMIT characters (ending in `...` when cut)."""
    if text is None or len(text) <= CONVERSATION_TEXT_LIMIT:
        return text
    return text[: CONVERSATION_TEXT_LIMIT - 3] + "..."


def _cut_json(value: Any) -> Any:
    """A played-back result as it was, or, when its JSON text is over the limit, that text cut."""
    if isinstance(value, str):
        return _cut(value)
    if isinstance(value, (list, dict)):
        text = json.dumps(value, ensure_ascii=False)
        return value if len(text) <= CONVERSATION_TEXT_LIMIT else _cut(text)
    return value


def summary_fields(summary: Summary) -> dict[str, Any]:
    """The verdict part of the results file, alike for a run and a merge."""
    return {
        "passed": summary.passed,
        "failed": summary.failed,
        "errored": summary.errored,
        "total": summary.total,
        "passRate": round(float(summary.rate), 4),
        "gate": float(summary.gate),
        "gateOn": summary.gate_on,
        "gatePassed": summary.gate_passed,
        "gateFailedBecause": list(summary.gate_failed_because),
        "internalError": summary.internal_error,
        "runs": summary.runs,
        "passAllK": {str(k): round(float(value) * 100, 4) for k, value in summary.pass_all_k.items()},
        **({"passAll": round(float(summary.all_passed) * 100, 4)} if summary.all_passed is not None else {}),
        **({"adaptive": dict(summary.adaptive)} if summary.adaptive is not None else {}),
        "flaky": list(summary.flaky),
        "blockingFailed": list(summary.blocking_failed),
        "violations": list(summary.violations),
        "replayMissed": list(summary.replay_missed),
        "overBudget": summary.over_budget,
        "regressed": list(summary.regressed),
        **({"quarantined": _quarantined(summary.quarantined)} if summary.quarantined else {}),
        **({"growth": growth_document(summary.growth)} if summary.growth else {}),
        "usage": {
            "inputTokens": summary.tokens[0],
            "outputTokens": summary.tokens[1],
            "latencyMs": round(summary.latency_ms, 1),
        }
        if summary.tokens
        else None,
        "byCategory": {
            name: {
                "passed": c.passed,
                "total": c.total,
                **({"passRate": round(float(c.rate), 4)} if c.task_rate is not None else {}),
            }
            for name, c in summary.by_category.items()
        },
    }


def _quarantined(held: Quarantined) -> dict[str, Any]:
    """The tasks out of the gate, counted apart, as the results file keeps them."""
    return {
        "tasks": list(held.tasks),
        "passed": held.passed,
        "failed": held.failed,
        "errored": held.errored,
        "total": held.total,
        "passAllK": {str(k): round(float(value) * 100, 4) for k, value in held.pass_all_k.items()},
        "flaky": list(held.flaky),
        "regressed": list(held.regressed),
        "violations": list(held.violations),
    }


def growth_document(growth: Iterable[Growth]) -> dict[str, Any]:
    """Each figure a growth limit applies to, against the baseline, as the results file and `compare --out` keep it."""
    return {
        g.figure: {
            "then": as_float(g.then),
            "now": as_float(g.now),
            "percent": rounded_percent(g.percent),
            "limit": None if g.limit is None else float(g.limit),
            "exceeded": g.exceeded,
            "tasks": g.tasks,
        }
        for g in growth
    }


def as_float(figure: Figure | None) -> float | None:
    """A cost figure as the files keep it."""
    return None if figure is None else float(figure)


def rounded_percent(value: Fraction | None) -> float | None:
    """A change in percent as the files keep it: to 4 decimals."""
    return None if value is None else round(float(value), 4)


def results_document(
    *,
    run_id: str,
    fingerprint: str,
    manifest: Mapping[str, Any],
    started_at: str,
    duration_ms: float,
    summary: Summary,
    tasks: Sequence[Mapping[str, Any]] | Spool,
    interrupted: bool,
    not_run: Sequence[str],
    baseline: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The results file's content: the source of truth every other report renders."""
    return {
        "schemaVersion": RESULTS_SCHEMA_VERSION,
        "runId": run_id,
        "fingerprint": fingerprint,
        "manifest": dict(manifest),
        "startedAt": started_at,
        "durationMs": round(duration_ms, 1),
        "interrupted": interrupted,
        "notRun": list(not_run),
        **summary_fields(summary),
        **({"baseline": dict(baseline)} if baseline is not None else {}),
        "results": tasks if isinstance(tasks, Spool) else list(tasks),
    }


def baseline_record(path: str, document: Mapping[str, Any]) -> dict[str, Any]:
    """What a results file records of the baseline it was compared with: its path, the SHA-256 of its bytes, its run."""
    return {
        "path": path,
        "sha256": file_sha256(path),
        "runId": document["runId"],
        "fingerprint": document["fingerprint"],
    }


def file_sha256(path: str) -> str:
    """The SHA-256 of a file's bytes; a ConfigError naming the file when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return sha256_hex(f.read())
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None


def partial(document: Mapping[str, Any]) -> str | None:
    """Why a results document is not the whole of its run (`interrupted, 7 tasks not run`); None when it is whole."""
    why = (["interrupted"] if document["interrupted"] else []) + (
        [f"{count(len(document['notRun']), 'task')} not run"] if document["notRun"] else []
    )
    return ", ".join(why) or None


def load_results(path: str, max_bytes: int = MAX_RESULTS_BYTES) -> dict[str, Any]:
    """A results file, checked whole; a ConfigError naming the first thing that makes it not one."""
    raw = read_input(path, max_bytes, f"over the {max_bytes} bytes a results file may have")
    try:
        document = json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not JSON this harness reads: nested too deeply") from None
    except ValueError:  # what int() refuses: more digits than sys.get_int_max_str_digits()
        raise ConfigError(f"{path}: not JSON this harness reads: an integer too long to read as a number") from None
    if not isinstance(document, dict) or document.get("schemaVersion") != RESULTS_SCHEMA_VERSION:
        raise ConfigError(f"{path}: not a results file of schema version {RESULTS_SCHEMA_VERSION}")
    problem = _problem(document, DOCUMENT, "")
    if problem is None:
        problem = next(filter(None, (_trials(entry, i) for i, entry in enumerate(document["results"]))), None)
    if problem is not None:
        raise ConfigError(f"{path}: {problem}")
    return document


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


def render_json(document: Mapping[str, Any]) -> Iterator[str]:
    """The document in pieces, indented at the top level, one line per entry of a list or object.

    Readable and greppable; fast, as json's indent= runs the pure-Python encoder, several times
    slower on 10,000 results; and in pieces, so that a large file is never held twice in memory.
    Strict JSON whatever an agent sent: see finite_json.
    """
    marked: list[str] = []  # the top level's numbers written as strings; a task entry lists its own
    yield "{"
    for number, (key, value) in enumerate(document.items()):
        yield f"{',' if number else ''}\n  {ENCODE(key)}: "
        yield from _top_level_value(key, value, marked)
    if marked and NON_FINITE not in document:
        yield f",\n  {ENCODE(NON_FINITE)}: "
        yield from _top_level_value(NON_FINITE, marked, [])
    yield "\n}\n"


def _top_level_value(key: str, value: Any, marked: list[str]) -> Iterator[str]:
    if not value or not isinstance(value, (list, dict, Spool)):
        yield finite_json([] if isinstance(value, Spool) else value, (key,), marked)
    elif isinstance(value, dict):
        yield "{"
        yield from (
            f"{',' if i else ''}\n    {ENCODE(k)}: {finite_json(v, (key, k), marked)}"
            for i, (k, v) in enumerate(value.items())
        )
        yield "\n  }"
    else:
        # A spool's entries are JSON already; a task entry lists its own numbers written as strings.
        items = (
            value.lines()
            if isinstance(value, Spool)
            else (
                entry_json(v) if isinstance(v, dict) else finite_json(v, (key, str(i)), marked)
                for i, v in enumerate(value)
            )
        )
        yield "["
        yield from (f"{',' if i else ''}\n    {item}" for i, item in enumerate(items))
        yield "\n  ]"


def entry_json(entry: Mapping[str, Any]) -> str:
    """A task entry as JSON text, its non-finite numbers written as strings and listed in its own `nonFinite`."""
    marked: list[str] = []
    text = finite_json(entry, (), marked)
    if not marked or NON_FINITE in entry:
        return text
    return finite_json({**entry, NON_FINITE: marked}, (), [])


def finite_json(value: Any, path: Sequence[str], marked: list[str]) -> str:
    """The value as strict JSON: NaN and infinities, which JSON has no numbers for (a bare NaN is not JSON to jq or a
    browser), become the strings "NaN", "Infinity" and "-Infinity", their JSON Pointers (RFC 6901) added to marked."""
    try:
        return ENCODE(value)
    except ValueError:
        return ENCODE(_finite(value, list(path), marked))


def _finite(value: Any, path: list[str], marked: list[str]) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        marked.append("".join("/" + key.replace("~", "~0").replace("/", "~1") for key in path))
        return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"
    if isinstance(value, dict):
        return {key: _finite(inner, [*path, str(key)], marked) for key, inner in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(inner, [*path, str(i)], marked) for i, inner in enumerate(value)]
    return value


def write_atomic(path: str, chunks: Iterable[str]) -> None:
    """Write beside the target, then rename over it: a reader never sees half a file.

    Through a symlink the file it points to is replaced, and the link kept; what is not a regular file (a device, a
    FIFO, a folder) is never replaced.
    """
    stage(path, chunks).commit()


class Staged:
    """A file written in full beside its target, waiting to be renamed over it (commit) or thrown away (discard)."""

    def __init__(self, path: str, target: str, temporary: str) -> None:
        self.path = path  # as given, for messages
        self.target = target
        self.temporary = temporary

    def commit(self) -> None:
        try:
            os.replace(self.temporary, self.target)
        except OSError as exc:
            self.discard()
            raise ConfigError(f"cannot write {self.path}: {exc.strerror or exc}") from None

    def discard(self) -> None:
        try:
            os.unlink(self.temporary)
        except FileNotFoundError:
            pass


def stage(path: str, chunks: Iterable[str]) -> Staged:
    """Write the chunks to a temporary file beside path, flushed to disk, with the mode path has (a new file: the mode a
    plain open() gives); ConfigError when that cannot be done."""
    target = os.path.realpath(path)
    try:
        mode: int | None = os.stat(target).st_mode
    except OSError:
        mode = None
    if mode is not None and not stat.S_ISREG(mode):
        raise ConfigError(f"cannot write {path}: not a regular file")
    try:
        fd, temporary = exclusive_file(os.path.dirname(target), ".eval-", ".tmp")
    except OSError as exc:
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    staged = Staged(path, target, temporary)
    try:
        # A lone surrogate from an agent becomes \\udXXX: inside a JSON string, the escape that reads back as it.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as f:
            if mode is not None:
                os.chmod(temporary, stat.S_IMODE(mode))  # a results file kept to its owner stays so
            f.writelines(chunks)
            f.flush()
            os.fsync(f.fileno())
    except OSError as exc:
        staged.discard()
        raise ConfigError(f"cannot write {path}: {exc.strerror or exc}") from None
    except BaseException:
        staged.discard()
        raise
    return staged


def commit(staged: Sequence[Staged]) -> None:
    """Rename each staged file over its target; when one cannot be, the rest are thrown away, not left beside theirs."""
    for number, file in enumerate(staged):
        try:
            file.commit()
        except BaseException:
            for rest in staged[number + 1 :]:
                rest.discard()
            raise


def exclusive_file(folder: str, prefix: str, suffix: str) -> tuple[int, str]:
    """A new file of a name no one else has, open to read and write with the mode a plain open() gives, and its path.

    The name holds the process id, so that a later run can tell a file a killed run left from one a run is writing;
    what killed runs left in the folder is removed first.
    """
    _remove_leftovers(folder)
    for _ in range(100):
        path = os.path.join(folder, f"{prefix}{os.getpid()}-{os.urandom(6).hex()}{suffix}")
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o666), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for a temporary file in {folder}")


def _remove_leftovers(folder: str) -> None:
    """Remove the temporary files of runs that were killed (kill -9, a power cut) before they could remove them.

    Only where a process id can be asked after without harm (on Windows os.kill ends the process), and only files
    older than this process: a harness in another PID namespace writing to the same folder keeps its files.
    """
    if os.name != "posix":
        return
    try:
        names = os.listdir(folder)
    except OSError:
        return
    for name in names:
        match = re.fullmatch(LEFTOVER, name) if name.startswith(".eval-") else None
        if match is None or _alive(int(match[1])):
            continue
        path = os.path.join(folder, name)
        try:
            if os.lstat(path).st_mtime < STARTED:
                os.unlink(path)
        except OSError:
            pass  # gone already, or not ours to remove


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


class Spool:
    """The task entries of a run, written to a temporary file as each task completes: memory stays flat however many
    trials there are, and every report reads them back from there, as often as it needs."""

    def __init__(self, results: str) -> None:
        folder = os.path.dirname(os.path.realpath(results))
        try:
            # Nameless from the start where the system can: a Ctrl-C at any instant leaves nothing behind.
            fd, self.path = os.open(folder, os.O_TMPFILE | os.O_RDWR, 0o600), ""
        except (AttributeError, OSError):
            fd, self.path = self._named(folder, results)
        # Only written through: lines() reads the descriptor (or the path). A text file open to read too resets its
        # decoder with every write, a Python call for every task.
        self.file = os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace")
        self.count = 0

    @staticmethod
    def _named(folder: str, results: str) -> tuple[int, str]:
        try:
            fd, path = exclusive_file(folder, ".eval-entries-", ".jsonl")
        except OSError as exc:
            raise ConfigError(f"cannot write {results}: {exc.strerror or exc}") from None
        if hasattr(os, "pread"):
            # Nameless from here on: nothing is left behind by a crash, and the folder may go away during the run.
            os.unlink(path)
            path = ""
        return fd, path

    def add(self, entry: Mapping[str, Any]) -> None:
        self.file.write(entry_json(entry) + "\n")
        self.count += 1

    def lines(self) -> Iterator[str]:
        """Each entry as the JSON text it was written as; readers may interleave."""
        self.file.flush()
        if self.path:
            with open(self.path, encoding="utf-8") as f:
                yield from (line.rstrip("\n") for line in f)
            return
        # A line longer than a block is gathered in place: joining it anew with each block took time in its square.
        fd, offset, line = self.file.fileno(), 0, bytearray()
        while block := os.pread(fd, 1 << 16, offset):
            offset += len(block)
            *ends, rest = block.split(b"\n")
            for end in ends:
                line += end
                yield line.decode("utf-8")
                line.clear()
            line += rest

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (json.loads(line) for line in self.lines())

    def __len__(self) -> int:
        return self.count

    def close(self) -> None:
        """Let the file go: the results file has the entries now."""
        self.file.close()
        if self.path:
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass


ENCODE = json_encoder(allow_nan=False)  # strict: NaN and the infinities are written as strings (finite_json)
