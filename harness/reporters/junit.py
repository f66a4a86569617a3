"""JUnit XML from a results document: a testcase per task, failures and errors kept apart."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from harness.records import Outputs, Summary
from harness.text import budget_text, calls_text, held_out, printable, transcript, turn_marks, verdict_text

if TYPE_CHECKING:
    from harness.comparison import Comparison


def render(
    document: Mapping[str, Any], summary: Summary, outputs: Outputs, comparison: Comparison | None
) -> Iterator[str]:
    """The report as harness.reporters.REPORTS renders it."""
    return junit_xml(document)


def junit_xml(document: Mapping[str, Any]) -> Iterator[str]:
    """One testsuite; classname = category, name = task id; a failed task is a failure, an errored one an error, and
    a quarantined one that did not pass (with no safety violation) skipped, as pytest writes an expected failure.

    Written as the entries stream by: a first pass counts them, a second renders each testcase.
    """
    statuses = Counter("skipped" if _held(entry) else entry["status"] for entry in document["results"])
    counts = (
        f'tests="{sum(statuses.values())}" failures="{statuses["fail"]}" errors="{statuses["error"]}"'
        f' skipped="{statuses["skipped"]}" time="{document["durationMs"] / 1000:.3f}"'
    )
    yield '<?xml version="1.0" encoding="UTF-8"?>\n'
    yield f'<testsuites name="agent-eval" {counts}>\n'
    yield f'  <testsuite name="agent-eval" timestamp={_attribute(document["startedAt"])} {counts}>\n'
    yield "    <properties>\n"
    manifest = document["manifest"]
    for name, value in [
        ("runId", document["runId"]),
        ("fingerprint", document["fingerprint"]),
        ("backend", manifest["backend"]),
        ("passRate", document["passRate"]),
        ("gate", document["gate"]),
        ("gatePassed", document["gatePassed"]),
        ("gateFailedBecause", ", ".join(document["gateFailedBecause"])),
        ("runs", document["runs"]),
        *([("trialsSaved", document["adaptive"]["saved"])] if "adaptive" in document else []),
        ("overBudget", document.get("overBudget", 0)),
        ("quarantined", ", ".join(document["quarantined"]["tasks"]) if "quarantined" in document else ""),
        ("interrupted", document["interrupted"]),
    ]:
        yield f"      <property name={_attribute(name)} value={_attribute(json.dumps(value).strip(chr(34)))} />\n"
    yield "    </properties>\n"
    for entry in document["results"]:
        trials = entry["trialResults"]
        time = f"{sum(trial['durationMs'] for trial in trials) / 1000:.3f}"
        case = (
            f"    <testcase classname={_attribute(printable(entry['category']))} name={_attribute(entry['id'])}"
            f' time="{time}"'
        )
        if entry["status"] == "pass":
            yield case + " />\n"
            continue
        tally = f" (passed {entry['passes']} of {entry['trials']} trials)" if entry["trials"] > 1 else ""
        kind = "skipped" if _held(entry) else "failure" if entry["status"] == "fail" else "error"
        message = printable(f"{entry['code']}: {entry['reason']}{tally}")
        if kind == "skipped":
            held = entry["quarantine"]
            issue = f", {held['issue']}" if held["issue"] else ""
            message = (
                printable(f"quarantined until {held['until']} ({held['reason']}{issue}): {entry['status']} ") + message
            )
        expected = [f"expected: {printable(entry['expected'])}"] if "expected" in entry else []  # before 0.3: none
        expected += [f"budget: {printable(budget_text(entry['budget']))}"] if "budget" in entry else []
        text = "\n".join([*expected, *(_trial_text(number, trial) for number, trial in enumerate(trials, 1))])
        named = "quarantined" if kind == "skipped" else entry["code"] or ""  # a skip's code is in its message
        yield (
            f"{case}>\n      <{kind} type={_attribute(named)} message={_attribute(message)}>"
            f"{_text(text)}</{kind}>\n    </testcase>\n"
        )
    yield "  </testsuite>\n</testsuites>\n"


def _held(entry: Mapping[str, Any]) -> bool:
    """A task its quarantine kept out of the gate that did not pass, with no safety violation (which it never hides)."""
    return held_out(entry) and entry["status"] != "pass"


def _text(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attribute(value: str) -> str:
    # As XML serializers write attributes: line ends and tabs as character references, so that a reader keeps them.
    escaped = _text(value).replace('"', "&quot;").replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#09;")
    return f'"{escaped}"'


def _trial_text(number: int, trial: Mapping[str, Any]) -> str:
    # XML has no way to write most control characters: every agent-controlled string is escaped.
    lines = [
        f"trial {number}: {printable(verdict_text(trial))}",
        f"  called: {printable(calls_text(trial, values=True))}",
    ]
    lines += [f"  {marks}"] if (marks := turn_marks(trial)) else []
    lines += [f"{'  ' * (depth + 2)}{printable(line)}" for depth, line in transcript(trial)]
    return "\n".join(lines)
