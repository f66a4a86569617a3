"""Render a run: console lines, and the results document written atomically."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Sequence
from decimal import ROUND_DOWN, Decimal
from typing import Any

from records import Reply, Result, Summary

RESULTS_SCHEMA_VERSION = 1


def percent(value: Decimal, places: int = 0) -> str:
    """`100`, `90`, `66.6`: truncated, never rounded up past a gate it missed."""
    return f"{value.quantize(Decimal(1).scaleb(-places), rounding=ROUND_DOWN).normalize():f}"


def summary_line(summary: Summary) -> str:
    """`9/10 PASS at 90% (gate 95%) · 1 failed · gate not met`."""
    gate_places = max(0, -summary.gate.normalize().as_tuple().exponent)
    rate = Decimal(summary.passed * 100) / summary.total if summary.total else Decimal(0)
    line = f"{summary.passed}/{summary.total} PASS at {percent(rate, max(1, gate_places))}% (gate {percent(summary.gate, gate_places)}%)"
    if summary.failed:
        line += f" · {summary.failed} failed"
    if summary.errored:
        line += f" · {summary.errored} error{'s' if summary.errored > 1 else ''}"
    if summary.not_run:
        line += f" · {summary.not_run} not run"
    if not summary.gate_passed:
        line += " · gate not met"
    return line


def describe_calls(reply: Reply) -> str:
    """What the agent did, in a few words: `imageman.asset.get(assetId)`, `(refused)`."""
    if reply.error_code is not None:
        return "(error)"
    if reply.tool_calls:
        return "; ".join(f"{call.name}({', '.join(call.args)})" for call in reply.tool_calls)
    return "(refused)" if reply.refused else "(no call)"


def result_line(result: Result, id_width: int) -> str:
    """One console line per task: status, id, what was called, duration, reason."""
    outcome = result.outcome
    line = f"{outcome.status.upper():<5} {result.task.id:<{id_width}}  {describe_calls(result.reply)}  {_millis(result.duration_ms)}"
    if outcome.status != "pass":
        line += f"  {outcome.code}: {outcome.reason}"
    return line


def _millis(ms: float) -> str:
    return f"{ms:.1f}ms" if ms < 10 else f"{ms:.0f}ms"


def results_document(
    *,
    harness_version: str,
    run_id: str,
    backend: str,
    backend_settings: dict[str, Any],
    task_file: dict[str, str],
    started_at: str,
    duration_ms: float,
    summary: Summary,
    results: Sequence[Result],
    interrupted: bool,
    not_run: Sequence[str],
) -> dict[str, Any]:
    """The results file's content: the source of truth every other report renders."""
    return {
        "schemaVersion": RESULTS_SCHEMA_VERSION,
        "harnessVersion": harness_version,
        "runId": run_id,
        "passed": summary.passed,
        "failed": summary.failed,
        "errored": summary.errored,
        "total": summary.total,
        "passRate": round(summary.pass_rate, 4),
        "gate": float(summary.gate),
        "gatePassed": summary.gate_passed,
        "startedAt": started_at,
        "durationMs": round(duration_ms, 1),
        "backend": backend,
        "backendSettings": backend_settings,
        "taskFile": task_file,
        "interrupted": interrupted,
        "notRun": list(not_run),
        "byCategory": {name: {"passed": c.passed, "total": c.total} for name, c in summary.by_category.items()},
        "results": [_result_entry(result) for result in results],
    }


def _result_entry(result: Result) -> dict[str, Any]:
    reply = result.reply
    return {
        "id": result.task.id,
        "category": result.task.category,
        "status": result.outcome.status,
        "code": result.outcome.code,
        "reason": result.outcome.reason,
        "toolCalls": [{"name": call.name, "args": dict(call.args)} for call in reply.tool_calls],
        "refused": reply.refused,
        "text": reply.text,
        "attempts": reply.attempts,
        "durationMs": round(result.duration_ms, 1),
    }


def render_json(document: dict[str, Any]) -> str:
    """Indented at the top level, one line per entry of a list or object: readable, greppable, fast.

    json's indent= runs the pure-Python encoder, several times slower on 10,000 results.
    """

    def dumps(value: Any) -> str:
        return json.dumps(value, ensure_ascii=False)

    members = []
    for key, value in document.items():
        if isinstance(value, list) and value:
            text = "[\n" + ",\n".join(f"    {dumps(item)}" for item in value) + "\n  ]"
        elif isinstance(value, dict) and value:
            text = "{\n" + ",\n".join(f"    {dumps(k)}: {dumps(v)}" for k, v in value.items()) + "\n  }"
        else:
            text = dumps(value)
        members.append(f"  {dumps(key)}: {text}")
    return "{\n" + ",\n".join(members) + "\n}\n"


def write_json_atomic(path: str, document: dict[str, Any]) -> None:
    """Write beside the target, then rename over it: a reader never sees half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    text = render_json(document)
    fd, tmp = tempfile.mkstemp(prefix=".eval-results-", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
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
