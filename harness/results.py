"""Render a run: console lines, and the results document written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from decimal import ROUND_DOWN, Decimal
from fractions import Fraction
from typing import Any

from harness.records import ConfigError, Reply, Result, Summary, TaskResult

RESULTS_SCHEMA_VERSION = 2
RESULTS_KEYS = ("runId", "fingerprint", "manifest", "startedAt", "durationMs", "interrupted", "notRun", "gate", "gateOn", "runs", "passed", "total", "passRate", "byCategory", "results")


def percent(value: Decimal | Fraction, places: int = 0) -> str:
    """`100`, `90`, `66.6`: truncated, never rounded up past a gate it missed."""
    if isinstance(value, Fraction):
        value = Decimal(value.numerator) / Decimal(value.denominator)
    return f"{value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN).normalize():f}"


def summary_line(summary: Summary) -> str:
    """`9/10 PASS at 90% (gate 95%) · 1 failed · gate not met`; with repeats, trials and pass^N."""
    gate_places = max(0, -summary.gate.normalize().as_tuple().exponent)
    places = max(1, gate_places)
    gate = f"(gate {percent(summary.gate, gate_places)}%)"
    rate = Fraction(summary.passed, summary.total) * 100 if summary.total else Fraction(0)
    trials = "" if summary.runs == 1 else " trials"
    trial_part = f"{summary.passed}/{summary.total}{trials} PASS at {percent(rate, places)}%"
    pass_all = f"pass^{summary.runs} {percent(summary.pass_all_k.get(summary.runs, Fraction(0)) * 100, places)}%"
    if summary.gate_on == "pass-all":
        parts = [f"{pass_all} {gate}", trial_part]
    else:
        parts = [f"{trial_part} {gate}"] + ([pass_all] if summary.runs > 1 else [])
    if summary.flaky:
        parts.append(f"{len(summary.flaky)} flaky")
    if summary.failed:
        parts.append(f"{summary.failed} failed")
    if summary.errored:
        parts.append(f"{summary.errored} error{'s' if summary.errored > 1 else ''}")
    if summary.violations:
        parts.append(f"{len(summary.violations)} safety violation{'s' if len(summary.violations) > 1 else ''}")
    if summary.not_run:
        parts.append(f"{summary.not_run} not run")
    if summary.tokens:
        latency = f"{summary.latency_ms / 1000:.1f} s" if summary.latency_ms >= 1000 else f"{summary.latency_ms:.0f} ms"
        parts.append(f"{summary.tokens[0]} tokens in, {summary.tokens[1]} out, {latency} of replies")
    if summary.blocking_failed:
        parts.append(f"blocking task failed: {', '.join(summary.blocking_failed)}")
    if summary.regressed:
        parts.append(f"regressed against the baseline: {', '.join(summary.regressed)}")
    if not summary.gate_passed:
        parts.append("gate not met")
    return " · ".join(parts)


def describe_calls(reply: Reply) -> str:
    """What the agent did, in a few words: `imageman.asset.get(assetId)`, `(refused)`."""
    if reply.error_code is not None:
        return "(error)"
    if reply.tool_calls:
        return "; ".join(f"{call.name}({', '.join(call.args)})" for call in reply.tool_calls)
    return "(refused)" if reply.refused else "(no call)"


def result_line(task_result: TaskResult, id_width: int) -> str:
    """One console line per task: status, id, (passes/trials,) what was called, duration, reason."""
    trials, miss, passes = task_result.trials, task_result.first_miss, task_result.passes
    shown = miss or trials[0]
    duration = sum(trial.duration_ms for trial in trials) / len(trials)
    tally = f"  {passes}/{len(trials)}" if len(trials) > 1 else ""
    line = f"{task_result.status.upper():<5} {task_result.task.id:<{id_width}}{tally}  {describe_calls(shown.reply)}  {_millis(duration)}"
    if miss is not None:
        line += f"  {miss.outcome.code}: {miss.outcome.reason}"
    if 0 < passes < len(trials):
        line += "  (flaky)"
    return line


def _millis(ms: float) -> str:
    return f"{ms:.1f}ms" if ms < 10 else f"{ms:.0f}ms"


def task_entry(task_result: TaskResult) -> dict[str, Any]:
    """A task's entry in the results file: its verdict over all trials, then each trial."""
    trials, miss, passes = task_result.trials, task_result.first_miss, task_result.passes
    return {
        "id": task_result.task.id,
        "category": task_result.task.category,
        "sha256": task_result.task.sha256,
        "blocking": task_result.task.blocking,
        "status": task_result.status,
        "code": miss.outcome.code if miss else None,
        "reason": miss.outcome.reason if miss else None,
        "violation": next((t.outcome.violation for t in trials if t.outcome.violation), None),
        "passes": passes,
        "trials": len(trials),
        "flaky": 0 < passes < len(trials),
        "trialResults": [_trial_entry(trial) for trial in trials],
    }


def _trial_entry(result: Result) -> dict[str, Any]:
    reply = result.reply
    return {
        "status": result.outcome.status,
        "code": result.outcome.code,
        "reason": result.outcome.reason,
        "violation": result.outcome.violation,
        "toolCalls": [{"name": call.name, "args": call.args} for call in reply.tool_calls],
        "refused": reply.refused,
        "text": reply.text,
        "attempts": reply.attempts,
        "durationMs": round(result.duration_ms, 1),
        "usage": {"inputTokens": reply.usage[0], "outputTokens": reply.usage[1]} if reply.usage else None,
    }


def summary_fields(summary: Summary) -> dict[str, Any]:
    """The verdict part of the results file, recomputed alike by a run and by merge."""
    return {
        "passed": summary.passed,
        "failed": summary.failed,
        "errored": summary.errored,
        "total": summary.total,
        "passRate": round(summary.pass_rate, 4),
        "gate": float(summary.gate),
        "gateOn": summary.gate_on,
        "gatePassed": summary.gate_passed,
        "runs": summary.runs,
        "passAllK": {str(k): round(float(value) * 100, 4) for k, value in summary.pass_all_k.items()},
        "flaky": list(summary.flaky),
        "blockingFailed": list(summary.blocking_failed),
        "violations": list(summary.violations),
        "regressed": list(summary.regressed),
        "usage": {"inputTokens": summary.tokens[0], "outputTokens": summary.tokens[1], "latencyMs": round(summary.latency_ms, 1)}
        if summary.tokens
        else None,
        "byCategory": {name: {"passed": c.passed, "total": c.total} for name, c in summary.by_category.items()},
    }


def results_document(
    *,
    run_id: str,
    fingerprint: str,
    manifest: Mapping[str, Any],
    started_at: str,
    duration_ms: float,
    summary: Summary,
    tasks: Sequence[dict[str, Any]],
    interrupted: bool,
    not_run: Sequence[str],
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
        "results": list(tasks),
    }


def load_results(path: str) -> dict[str, Any]:
    """A results file, or a ConfigError saying why it is not one."""
    try:
        with open(path, encoding="utf-8") as f:
            document = json.load(f)
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise ConfigError(f"{path}: not JSON: {exc}") from None
    if not isinstance(document, dict) or document.get("schemaVersion") != RESULTS_SCHEMA_VERSION:
        raise ConfigError(f"{path}: not a results file of schema version {RESULTS_SCHEMA_VERSION}")
    missing = [key for key in RESULTS_KEYS if key not in document]
    if missing:
        raise ConfigError(f"{path}: not a whole results file: no {', '.join(missing)}")
    return document


def render_json(document: Mapping[str, Any]) -> Iterator[str]:
    """The document in pieces, indented at the top level, one line per entry of a list or object.

    Readable and greppable; fast, as json's indent= runs the pure-Python encoder, several times
    slower on 10,000 results; and in pieces, so that a large file is never held twice in memory.
    """

    dumps = json.JSONEncoder(ensure_ascii=False).encode  # one encoder for all the pieces, not one per dumps()
    yield "{"
    for number, (key, value) in enumerate(document.items()):
        yield f"{',' if number else ''}\n  {dumps(key)}: "
        if isinstance(value, (list, dict)) and value:
            entries = (dumps(item) for item in value) if isinstance(value, list) else (f"{dumps(k)}: {dumps(v)}" for k, v in value.items())
            yield "[" if isinstance(value, list) else "{"
            for index, entry in enumerate(entries):
                yield f"{',' if index else ''}\n    {entry}"
            yield "\n  ]" if isinstance(value, list) else "\n  }"
        else:
            yield dumps(value)
    yield "\n}\n"


def write_atomic(path: str, chunks: Iterable[str]) -> None:
    """Write beside the target, then rename over it: a reader never sees half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".eval-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.writelines(chunks)
            f.flush()
            os.fsync(f.fileno())
        # mkstemp makes the file private; give it the mode a plain open() would.
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
