"""JUnit XML from a results document: a testcase per task, failures and errors kept apart."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness.text import calls_text, printable, transcript


def junit_xml(document: Mapping[str, Any]) -> str:
    """One testsuite; classname = category, name = task id; a failed task is a failure, an errored one an error."""
    import xml.etree.ElementTree as ET  # only runs that ask for JUnit pay for it

    entries = document["results"]
    failures = sum(entry["status"] == "fail" for entry in entries)
    errors = sum(entry["status"] == "error" for entry in entries)
    seconds = f"{document['durationMs'] / 1000:.3f}"
    counts = {
        "tests": str(len(entries)),
        "failures": str(failures),
        "errors": str(errors),
        "skipped": "0",
        "time": seconds,
    }
    suites = ET.Element("testsuites", name="agent-eval", **counts)
    suite = ET.SubElement(suites, "testsuite", name="agent-eval", timestamp=document["startedAt"], **counts)
    properties = ET.SubElement(suite, "properties")
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
        ("interrupted", document["interrupted"]),
    ]:
        ET.SubElement(properties, "property", name=name, value=json.dumps(value).strip('"'))
    for entry in entries:
        trials = entry["trialResults"]
        case = ET.SubElement(
            suite,
            "testcase",
            classname=printable(entry["category"]),
            name=entry["id"],
            time=f"{sum(trial['durationMs'] for trial in trials) / 1000:.3f}",
        )
        if entry["status"] != "pass":
            tally = f" (passed {entry['passes']} of {entry['trials']} trials)" if entry["trials"] > 1 else ""
            verdict = ET.SubElement(case, "failure" if entry["status"] == "fail" else "error", type=entry["code"] or "")
            verdict.set("message", printable(f"{entry['code']}: {entry['reason']}{tally}"))
            expected = (
                [f"expected: {printable(entry['expected'])}"] if "expected" in entry else []
            )  # results from before 0.3 lack it
            verdict.text = "\n".join(
                [*expected, *(_trial_text(number, trial) for number, trial in enumerate(trials, 1))]
            )
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def _trial_text(number: int, trial: Mapping[str, Any]) -> str:
    # XML has no way to write most control characters: every agent-controlled string is escaped.
    verdict = trial["status"] if trial["status"] == "pass" else f"{trial['status']} {trial['code']}: {trial['reason']}"
    lines = [f"trial {number}: {printable(verdict)}", f"  called: {printable(calls_text(trial, values=True))}"]
    lines += [f"{'  ' * (depth + 2)}{printable(line)}" for depth, line in transcript(trial)]
    return "\n".join(lines)
